# Sourced by ci/setup.sh and ci/setup-lab-runner.sh: install_missing PKG... installs those
# of the Debian packages not installed yet (one apt-get update first, only if any is
# missing), as root, without recommends.
install_missing() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    echo "$(basename "$0"): installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}
