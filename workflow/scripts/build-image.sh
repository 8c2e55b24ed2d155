#!/usr/bin/env bash
# Snakemake adapter: build the offline image with containers/offline/build.sh
# and check what it wrote.  Usage: build-image.sh OUTPUT.sqfs
set -euo pipefail
out=$1
if [[ $(id -u) -ne 0 ]]; then
    echo "error: building the offline image needs root (mmdebstrap --mode=root)" >&2
    exit 1
fi
for tool in mmdebstrap mksquashfs; do
    command -v "$tool" >/dev/null || {
        echo "error: $tool not found; install it with: workflow/scripts/install-deps.sh containers" >&2
        exit 1
    }
done
start=$(date +%s)
containers/offline/build.sh "$out"
end=$(date +%s)
# build.sh wrote OUTPUT.sha256; it must describe the file that is there now.
want=$(cut -d' ' -f1 "$out.sha256")
got="sha256:$(sha256sum "$out" | cut -d' ' -f1)"
if [[ "$want" != "$got" ]]; then
    echo "error: $out is $got but $out.sha256 says $want" >&2
    exit 1
fi
echo "image $out: $got, $(stat -c %s "$out") bytes, $(wc -l < "$out.manifest") packages, built in $((end - start)) s"
