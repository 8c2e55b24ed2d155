# The project's IMB: Spack's recipe with the pinned archive's two checksums and
# an optimised build (the sources' Makefile says -g -O0; spack-envs/README.md).
import os

from spack.package import *
from spack.pkg.builtin.intel_mpi_benchmarks import IntelMpiBenchmarks as BuiltinImb


class IntelMpiBenchmarks(BuiltinImb):
    """IMB 2021.3 as hpcvirt builds it: -g -O2 instead of the sources' -g -O0
    (workflow/lib/hpcvirt/build.py makes the same change)."""

    # Both acceptable files of the pinned source (workflow/lib/hpcvirt/sources.py); Spack checks one
    # checksum per version, the one of the copy hpcvirt.spack put in the mirror.
    version("2021.3", sha256={
        "official archive": "9b58a4a7eef7c0c877513152340948402fd87cb06270d2d81308dc2ef740f4c7",
        "mirror copy": "7a22e0406d04ec45ee89eae8c2e511ca7661ef4b0389bf28a40763bd8c050ecd",
    }[os.environ.get("HPCVIRT_SPACK_COPY_INTEL_MPI_BENCHMARKS", "official archive")])

    @property
    def build_targets(self):
        # the top-level Makefile's own targets (IMB-MPI1, ...): with only TARGET=MPI1 it builds all seven
        targets = super().build_targets
        return [f"IMB-{t[len('TARGET='):]}" if t.startswith("TARGET=") else t for t in targets]

    def edit(self, spec, prefix):
        super().edit(spec, prefix)
        makefile = join_path(self.build_directory, "src_cpp", "Makefile")
        found = open(makefile).read().count("-g -O0")
        if found != 2:
            raise InstallError(f"{makefile}: expected two '-g -O0' flag lines to patch, found {found}")
        filter_file("-g -O0", "-g -O2", makefile, string=True)
