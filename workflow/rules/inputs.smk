# The study files (config/config.yaml and the --configfile overlays) are read
# safely before the workflow loads them: a duplicate key, an oversized or
# non-UTF-8 file or an alias bomb stops here, naming file and key
# (hpcvirt.config.check_files).  No rules here.
import sys

sys.path.insert(0, f"{workflow.basedir}/workflow/lib")

from hpcvirt.config import ConfigError, check_files

try:
    check_files(["config/config.yaml", *(workflow.overwrite_configfiles or [])])
except ConfigError as exc:
    raise WorkflowError(str(exc)) from None
