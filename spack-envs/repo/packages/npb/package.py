# The project's NPB: Spack's recipe with the pinned archive's two checksums and
# the flag gfortran >= 10 needs (spack-envs/README.md).
import os

from spack.package import *
from spack.pkg.builtin.npb import Npb as BuiltinNpb


class Npb(BuiltinNpb):
    """NPB 3.4.1 as hpcvirt builds it: FFLAGS -O3 -fallow-argument-mismatch, CFLAGS -O3
    (workflow/lib/hpcvirt/build.py uses the same flags)."""

    # Both acceptable files of the pinned source (workflow/lib/hpcvirt/sources.py); Spack checks one
    # checksum per version, the one of the copy hpcvirt.spack put in the mirror.
    version("3.4.1", sha256={
        "official archive": "f3a43467da6e84a829ea869156d3ea86c17932136bb413a4b6dab23018a28881",
        "mirror copy": "96aed4c0ef25991526943b30c8ef8ff9ce7e00fff301783e80cf591fa321818e",
    }[os.environ.get("HPCVIRT_SPACK_COPY_NPB", "official archive")])

    def edit(self, spec, prefix):
        super().edit(spec, prefix)
        if "implementation=mpi" not in spec or not spec.satisfies("%gcc@10:"):
            return
        # gfortran >= 10 rejects NPB's MPI calls (arguments of several types) without this flag
        make_def = join_path(self.build_directory, "config", "make.def")
        filter_file(r"^FFLAGS = -O3$", "FFLAGS = -O3 -fallow-argument-mismatch", make_def)
        if "FFLAGS = -O3 -fallow-argument-mismatch\n" not in open(make_def).read():
            raise InstallError(f"{make_def}: no line 'FFLAGS = -O3' to add -fallow-argument-mismatch to")
