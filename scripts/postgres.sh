#!/usr/bin/env bash
# Makes sure a PostgreSQL server runs for the test suite and prints the URL the tests
# connect through (HANARANG_TEST_POSTGRES). In order:
#   1. HANARANG_TEST_POSTGRES, when it is set: used as it is (it must answer);
#   2. the machine's own server on 127.0.0.1:5432, when it answers;
#   3. an installed Debian cluster (pg_lsclusters), started with pg_ctlcluster;
#   4. otherwise `postgresql` is installed from Debian's packages, and its cluster started.
# For 3 and 4 the user `postgres` is given the password `postgres`, so the tests get in
# over TCP whatever pg_hba.conf asks for (trust, or a password).
set -euo pipefail

answers() { # URL
    if command -v psql >/dev/null; then
        psql "$1" -Atqc 'SELECT 1' >/dev/null 2>&1
    else
        pg_isready -q -d "$1" 2>/dev/null
    fi
}

if [[ -n "${HANARANG_TEST_POSTGRES:-}" ]]; then
    if ! answers "$HANARANG_TEST_POSTGRES"; then
        echo "postgres: HANARANG_TEST_POSTGRES is set but its server does not answer" >&2
        exit 1
    fi
    echo "$HANARANG_TEST_POSTGRES"
    exit 0
fi

trust="postgres://postgres@127.0.0.1:5432/postgres"
with_password="postgres://postgres:postgres@127.0.0.1:5432/postgres"
for url in "$trust" "$with_password"; do
    if answers "$url"; then
        echo "$url"
        exit 0
    fi
done

as_root() {
    if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo -n "$@"; fi
}

if ! command -v pg_lsclusters >/dev/null || [[ -z "$(pg_lsclusters -h 2>/dev/null)" ]]; then
    echo "postgres: no server answers and none is installed: installing postgresql from Debian's packages" >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
fi

cluster=$(pg_lsclusters -h | awk 'NR == 1 { print $1 " " $2 }')
if [[ -z "$cluster" ]]; then
    echo "postgres: postgresql is installed but has no cluster (pg_createcluster makes one)" >&2
    exit 1
fi
# shellcheck disable=SC2086 # "VERSION NAME"
as_root pg_ctlcluster --skip-systemctl-redirect $cluster start >&2 || true
for _ in $(seq 1 60); do
    if pg_isready -q -h 127.0.0.1 -p 5432; then break; fi
    sleep 0.5
done
as_root runuser -u postgres -- psql -qc "ALTER USER postgres PASSWORD 'postgres'" >&2
for url in "$trust" "$with_password"; do
    if answers "$url"; then
        echo "$url"
        exit 0
    fi
done
echo "postgres: started cluster $cluster, but 127.0.0.1:5432 does not let the user postgres in" >&2
exit 1
