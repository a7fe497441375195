# Sourced by the tools/ and bench/ scripts: hier_help "$@" prints the script's header comment (the comment
# block under the #! line, which holds its "usage:" line) and exits 0 when an argument before any
# "--" is -h or --help. Called before the script does anything else (installs, builds, clusters).
hier_help() {
  local a
  for a in "$@"; do
    case $a in
      --) return 0;;
      -h|--help) sed -n '2,/^[^#]/{/^#/!d; s/^# \{0,1\}//; p}' "$0"; exit 0;;
    esac
  done
}
