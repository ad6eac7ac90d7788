#!/bin/sh
# Stop hook: before the agent goes idle, wait a while for work, and if some
# arrives keep the agent going with it instead of stopping.
#
# Claude Code runs it on Stop. Exit 2 with text on stderr blocks the stop and
# hands the text to the model; exit 0 lets the agent stop. The hook's input
# (JSON on stdin) says `"stop_hook_active": true` when the agent is already
# continuing because of a stop hook; the wait still runs then, since new work
# is new, but Claude Code ends the turn after a number of consecutive blocks.
#
# CHIPSET_WAIT (seconds, default 50) must stay below the hook's `timeout`
# in settings.json (60 here), or the host kills the wait.
set -u
[ -n "${CHIPSET_AGENT:-}" ] || exit 0
cat >/dev/null # the hook input is not needed
brief=$(chipset wait "$CHIPSET_AGENT" --timeout "${CHIPSET_WAIT:-50}" 2>/dev/null) || exit 0
[ -n "$brief" ] || exit 0 # timed out: nothing came, let the agent stop
printf 'chipset: new work for you (agent %s):\n%s\n' "$CHIPSET_AGENT" "$brief" >&2
exit 2
