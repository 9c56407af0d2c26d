#!/usr/bin/env bash
# with-postgres.sh CMD [ARGS...]
#
# Runs CMD against a throwaway PostgreSQL server and propagates CMD's exit code:
#   1. installs PostgreSQL from Debian's packages when no server binaries are found
#      (needs root; `apt-get update` then `apt-get install -y postgresql`);
#   2. creates a cluster in a fresh temporary directory (initdb runs as the
#      unprivileged `postgres` user when this script runs as root; the user is
#      created when missing);
#   3. starts it on a free loopback port, its unix socket in the same directory;
#   4. creates the database `idemgate` and exports to CMD
#        IDEMGATE_POSTGRES_DSN  postgres://postgres@127.0.0.1:PORT/idemgate?sslmode=disable
#        IDEMGATE_PGDATA        the cluster's data directory
#        IDEMGATE_PG_CTL        an executable that runs pg_ctl for this cluster as the right
#                               user: `"$IDEMGATE_PG_CTL" stop` / `"$IDEMGATE_PG_CTL" start`
#        IDEMGATE_WITH_POSTGRES the absolute path of this script
#   5. stops the server and removes the directory when CMD ends, fails or is interrupted.
#
# When IDEMGATE_POSTGRES_DSN is already set (an outer invocation, or a server CI
# provides), the script runs CMD against it unchanged. Set IDEMGATE_PG_BINDIR to
# pick a PostgreSQL bin directory. Example: scripts/with-postgres.sh go test ./...
set -euo pipefail

say() { printf 'with-postgres: %s\n' "$*" >&2; }
die() { say "$*"; exit 125; }

[ "$#" -gt 0 ] || { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

if [ -n "${IDEMGATE_POSTGRES_DSN:-}" ]; then
	exec "$@"
fi

self="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"

find_bindir() {
	local d
	if [ -n "${IDEMGATE_PG_BINDIR:-}" ]; then
		printf '%s\n' "$IDEMGATE_PG_BINDIR"
		return
	fi
	if command -v pg_config >/dev/null 2>&1; then
		d="$(pg_config --bindir 2>/dev/null || true)"
		if [ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
			printf '%s\n' "$d"
			return
		fi
	fi
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k5 -V -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
			printf '%s\n' "$d"
			return
		fi
	done
	if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
		dirname "$(command -v initdb)"
	fi
}

bindir="$(find_bindir)"
if [ -z "$bindir" ]; then
	[ "$(id -u)" -eq 0 ] || die "PostgreSQL server binaries not found and not root: install the Debian package postgresql, or set IDEMGATE_PG_BINDIR"
	say "installing PostgreSQL from Debian's packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2
	apt-get install -y postgresql >&2
	bindir="$(find_bindir)"
	[ -n "$bindir" ] || die "installed postgresql, but found no initdb under /usr/lib/postgresql/*/bin"
fi
[ -x "$bindir/initdb" ] || die "$bindir/initdb missing or not executable (IDEMGATE_PG_BINDIR?)"

# Run a command as the cluster's owner: postgres when root (PostgreSQL refuses root).
as_owner=()
if [ "$(id -u)" -eq 0 ]; then
	if ! id postgres >/dev/null 2>&1; then
		say "creating the unprivileged user postgres"
		useradd --system --user-group --home-dir /var/lib/postgresql --shell /bin/sh postgres
	fi
	if command -v runuser >/dev/null 2>&1; then
		as_owner=(runuser -u postgres --)
	else
		as_owner=(su postgres -s /bin/sh -c '"$0" "$@"')
	fi
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/idemgate-pg.XXXXXX")"
pgdata="$tmp/data"
started=0
cleanup() {
	local rc=$?
	if [ "$started" = 1 ]; then
		"${as_owner[@]}" "$bindir/pg_ctl" -D "$pgdata" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

chmod 0755 "$tmp"
mkdir -p "$tmp/socket"
if [ "$(id -u)" -eq 0 ]; then chown postgres: "$tmp" "$tmp/socket"; fi

"${as_owner[@]}" "$bindir/initdb" -D "$pgdata" -U postgres -A trust -E UTF8 --no-locale --no-sync >"$tmp/initdb.log" 2>&1 ||
	{ cat "$tmp/initdb.log" >&2; die "initdb failed"; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# pg_ctl as the owner, for this cluster; the outage tests stop and start it with it.
cat >"$tmp/pg_ctl" <<SH
#!/bin/sh
exec ${as_owner[*]:+${as_owner[*]}} "$bindir/pg_ctl" -D "$pgdata" -l "$tmp/server.log" -w -t 60 "\$@"
SH
if [ "${as_owner[0]:-}" = su ]; then
	printf '#!/bin/sh\nexec su postgres -s /bin/sh -c '\''"$0" "$@"'\'' "%s" -D "%s" -l "%s" -w -t 60 "$@"\n' \
		"$bindir/pg_ctl" "$pgdata" "$tmp/server.log" >"$tmp/pg_ctl"
fi
chmod 0755 "$tmp/pg_ctl"

port=""
for _ in 1 2 3 4 5 6 7 8 9 10; do
	# Below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768+ by
	# default): while an outage test has the server stopped, a process binding port 0
	# (an in-process Temporal server of another package's tests) must not take its port.
	p=$((20000 + RANDOM % 12000))
	port_free "$p" || continue
	{
		echo "listen_addresses = '127.0.0.1'"
		echo "port = $p"
		echo "unix_socket_directories = '$tmp/socket'"
		echo "max_connections = 200"
	} >>"$pgdata/postgresql.conf"
	if "$tmp/pg_ctl" start >/dev/null 2>&1; then
		started=1
		port="$p"
		break
	fi
	started=1 # it may have half-started; cleanup stops it
	say "could not start on port $p, trying another"
	"$tmp/pg_ctl" -m immediate stop >/dev/null 2>&1 || true
	started=0
done
[ -n "$port" ] || { cat "$tmp/server.log" >&2 || true; die "could not start PostgreSQL (log above)"; }

"${as_owner[@]}" "$bindir/createdb" -h "$tmp/socket" -p "$port" -U postgres idemgate ||
	die "createdb idemgate failed"

export IDEMGATE_POSTGRES_DSN="postgres://postgres@127.0.0.1:$port/idemgate?sslmode=disable"
export IDEMGATE_PGDATA="$pgdata"
export IDEMGATE_PG_CTL="$tmp/pg_ctl"
export IDEMGATE_WITH_POSTGRES="$self"
say "PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (data $pgdata)"

set +e
"$@"
rc=$?
set -e
exit "$rc"
