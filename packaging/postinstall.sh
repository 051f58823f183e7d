#!/bin/sh
# Package postinstall: the talon system user the units run as, the
# configuration directory, and systemd's view of the new units. The
# services are not enabled or started: configure them first.
set -e
if ! getent group talon >/dev/null 2>&1; then
	groupadd --system talon
fi
if ! getent passwd talon >/dev/null 2>&1; then
	useradd --system --gid talon --home-dir /var/lib/talon --no-create-home --shell /usr/sbin/nologin talon
fi
install -d -m 0750 -o root -g talon /etc/talon
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	systemctl daemon-reload || true
fi
