# MILC has no recipe in Spack: the project's own, building what
# workflow/lib/hpcvirt/build.py builds today (spack-envs/README.md).
import re

from spack.package import *

COMMIT = "1e11e121b220433c220310b79de03cb3ee6adba0"
APP, TARGET = "ks_imp_rhmc", "su3_rhmd_hisq"
#: MILC's own defaults (-O3, single precision), stated; CGTIME makes every solve print its time and iterations
MAKE_VARS = ("MPP=true", "PRECISION=1", "OPT=-O3", "CTIME=-DCGTIME")
RATIONALS = "ks_imp_rhmc/test/rationals.sample.su3_rhmc_hisq_f211"
#: MPI-1 functions removed in MPI-3 that generic/com_mpi.c calls, and their MPI-2 replacements
MPI3_RENAMES = (("MPI_Errhandler_create", "MPI_Comm_create_errhandler"),
                ("MPI_Errhandler_set", "MPI_Comm_set_errhandler"), ("MPI_Attr_get", "MPI_Comm_get_attr"))


class Milc(MakefilePackage):
    """MILC lattice QCD code, version 7, at a pinned commit: su3_rhmd_hisq of ks_imp_rhmc (the RHMD HISQ
    program nearest the classic benchmark ks_imp_dyn/su3_rmd, which does not link at this commit) and the
    rational-function file of MILC's test suite the project's input uses."""

    homepage = "https://github.com/milc-qcd/milc_qcd"
    url = f"https://github.com/milc-qcd/milc_qcd/archive/{COMMIT}.tar.gz"

    # Only the mirror copy (git archive of the commit without folders not needed to build) is pinned:
    # MILC publishes no archive or checksum of this commit (workflow/lib/hpcvirt/sources.py).  The version is
    # the commit's first 8 digits (a 40-digit version would make Spack fetch with git).
    version("1e11e121", sha256="307c65568ed7c48088a2b031c2a3e714922a80d9535370c0977215f60058da4b")

    depends_on("mpi")

    def edit(self, spec, prefix):
        # a build-time patch, recorded: MPI-1 names Open MPI 4.1's mpi.h no longer declares
        com = "generic/com_mpi.c"
        text = open(com).read()
        for old, new in MPI3_RENAMES:
            calls = len(re.findall(rf"\b{old}\(", text))
            if calls != 1:
                raise InstallError(f"{com}: expected one call of {old} to patch, found {calls}")
            text = re.sub(rf"\b{old}\(", f"{new}(", text)
        with open(com, "w") as fh:
            fh.write(text)
        copy("Makefile", join_path(APP, "Makefile"))      # MILC's build procedure

    def build(self, spec, prefix):
        with working_dir(APP):
            # one make at a time: the application's Makefile builds MILC's libraries by recursive make
            make(*MAKE_VARS, f"MY_CC={spec['mpi'].mpicc}", TARGET, parallel=False)

    def install(self, spec, prefix):
        mkdirp(prefix.bin)
        install(join_path(APP, TARGET), prefix.bin)
        mkdirp(prefix.share.milc)
        install(RATIONALS, prefix.share.milc)
