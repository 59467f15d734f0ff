#!/bin/bash
# voxgate-healthcheck: the containers' HEALTHCHECK, with nothing but bash (its /dev/tcp) and
# awk, so the runtime image needs no curl.
#
#   voxgate-healthcheck http ENV_VAR PATH
#       GET PATH from the address held in the environment variable ENV_VAR (the binary's own
#       listen setting, e.g. VOXGATE_SIGNAL_LISTEN=0.0.0.0:8080; a wildcard host means
#       loopback). Healthy on HTTP 200.
#   voxgate-healthcheck connected
#       Healthy while the container holds at least one established TCP connection (the
#       echo-bot has no HTTP endpoint; its gRPC subscriptions to transceivers are its health).
set -u

http() {
  local var=$1 path=$2
  local addr=${!var:-}
  if [[ -z $addr ]]; then
    echo "voxgate-healthcheck: $var is not set" >&2
    return 1
  fi
  local port=${addr##*:} host=${addr%:*}
  host=${host#[}
  host=${host%]}
  case $host in
    '' | 0.0.0.0) host=127.0.0.1 ;;
    ::) host=::1 ;;
  esac
  exec 3<>"/dev/tcp/$host/$port" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: localhost\r\nConnection: close\r\n\r\n' "$path" >&3
  local status
  IFS= read -r -t 2 status <&3 || return 1
  exec 3<&-
  [[ $status == HTTP/1.?' 200'* ]]
}

connected() {
  # /proc/net/tcp{,6}: column 4 is the state, 01 = ESTABLISHED.
  awk 'FNR > 1 && $4 == "01" { found = 1 } END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

case ${1:-} in
  http) [[ $# -eq 3 ]] && http "$2" "$3" ;;
  connected) connected ;;
  *)
    echo "usage: voxgate-healthcheck http ENV_VAR PATH | connected" >&2
    exit 2
    ;;
esac
