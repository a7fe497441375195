#!/bin/bash
# Builds the Debian package libhier_<version>_<arch>.deb holding both MPI builds side by side
# (CPack's DEB generator over the two build trees, packaging/CPackConfig.cmake).
#
# usage: tools/build-deb.sh [--builds OPENMPI_DIR MPICH_DIR] [--out DIR]
#
# By default it packages build/openmpi and build/mpich (the presets' trees, which tools/test.sh
# builds); a tree that is not configured yet is configured with its preset, and only what the
# package holds is built (libhier, hier-info, hier-tune), not the tests. The .deb is written to
# --out (default build/deb/) and its path printed last. Check it with tools/check-deb.sh.
# Needs cmake, ninja and dpkg-dev (dpkg-shlibdeps); no fakeroot (CPack sets the owners itself).
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/lib/help.sh
hier_help "$@"
bo=build/openmpi bm=build/mpich out=build/deb
while (($#)); do
  case $1 in
    --builds) bo=$2 bm=$3; shift 3;;
    --out) out=$2; shift 2;;
    *) echo "build-deb.sh: unknown option $1 (--builds OPENMPI_DIR MPICH_DIR, --out DIR)" >&2; exit 2;;
  esac
done
for t in cmake cpack ninja dpkg-shlibdeps; do
  command -v $t >/dev/null || { echo "build-deb.sh: '$t' missing (Debian: apt-get install cmake ninja-build dpkg-dev)" >&2; exit 2; }
done

build() {  # DIR MPI
  local dir=$1 mpi=$2
  if [[ ! -f $dir/CMakeCache.txt ]]; then
    echo "== configuring $dir ($mpi)"
    if [[ $dir == build/$mpi ]]; then cmake --preset "$mpi" >/dev/null
    else cmake -S . -B "$dir" -G Ninja -DHIER_MPI="$mpi" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null; fi
  fi
  grep -q "^HIER_MPI:.*=$mpi\$" "$dir/CMakeCache.txt" || { echo "build-deb.sh: $dir is not a $mpi build" >&2; exit 2; }
  echo "== building $dir (libhier, hier-info, hier-tune)"
  cmake --build "$dir" --target hier hier-info hier-tune >/dev/null
}
build "$bo" openmpi
build "$bm" mpich

version=$(sed -n 's/^project(libhier VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
mkdir -p "$out"
out=$(cd "$out" && pwd)
# Stage both builds into one tree with their install rules. cmake --install rewrites each
# tree's install_manifest.txt (the list its uninstall target removes): keep a user's manifest.
stage=$(mktemp -d /tmp/hier-deb-stage.XXXXXX)
saved=()
for d in "$bo" "$bm"; do
  if [[ -f $d/install_manifest.txt ]]; then cp "$d/install_manifest.txt" "$d/install_manifest.txt.build-deb"; saved+=("$d"); fi
done
restore() {
  for d in "$bo" "$bm"; do rm -f "$d/install_manifest.txt"; done
  for d in "${saved[@]}"; do mv "$d/install_manifest.txt.build-deb" "$d/install_manifest.txt"; done
  rm -rf "$stage"
}
trap restore EXIT
for d in "$bo" "$bm"; do
  cmake --install "$d" --prefix "$stage/usr" >/dev/null || { echo "build-deb.sh: cmake --install $d failed" >&2; exit 1; }
done
echo "== cpack -G DEB ($(find "$stage" -type f | wc -l) files)"
HIER_STAGE=$stage HIER_VERSION=$version cpack --config packaging/CPackConfig.cmake -B "$out" >"$out/cpack.log" 2>&1 \
  || { cat "$out/cpack.log"; echo "build-deb.sh: cpack failed" >&2; exit 1; }
rm -rf "$out/_CPack_Packages"
deb=$(ls -t "$out"/libhier_"$version"_*.deb | head -1)
dpkg-deb --info "$deb" | sed -n 's/^ \(Package\|Version\|Depends\|Installed-Size\):/  \1:/p'
echo "$deb"
