#!/bin/sh
# Registers chamvi's search attributes on a Temporal cluster, once; safe to run again.
# Runs in temporalio/admin-tools (docker-compose.yml); works anywhere the `temporal` CLI does:
#   TEMPORAL_ADDRESS=host:7233 CHAMVI_SEARCH_ATTRIBUTES="ChamviAgent=Keyword ..." sh register-search-attributes.sh
set -eu

: "${TEMPORAL_ADDRESS:?set TEMPORAL_ADDRESS (host:port)}"
: "${CHAMVI_SEARCH_ATTRIBUTES:?set CHAMVI_SEARCH_ATTRIBUTES (Name=Type ...)}"
NAMESPACE="${TEMPORAL_NAMESPACE:-default}"
ATTEMPTS="${REGISTER_ATTEMPTS:-60}"

# auto-setup registers the namespace a little after the server answers
attempt=1
until temporal operator namespace describe --namespace "$NAMESPACE" >/dev/null 2>&1; do
  if [ "$attempt" -ge "$ATTEMPTS" ]; then
    echo "namespace '$NAMESPACE' not found at $TEMPORAL_ADDRESS after $ATTEMPTS attempts" >&2
    exit 1
  fi
  attempt=$((attempt + 1))
  sleep 2
done

existing="$(temporal operator search-attribute list --namespace "$NAMESPACE")"
for spec in $CHAMVI_SEARCH_ATTRIBUTES; do
  name="${spec%%=*}"
  type="${spec#*=}"
  if printf '%s\n' "$existing" | grep -qw "$name"; then
    echo "search attribute $name already registered"
  else
    temporal operator search-attribute create --namespace "$NAMESPACE" --name "$name" --type "$type"
    echo "search attribute $name ($type) registered"
  fi
done
