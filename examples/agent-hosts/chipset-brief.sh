#!/bin/sh
# Prompt-submit hook: put what needs this agent in front of the model.
#
# Claude Code runs it on UserPromptSubmit; what it prints on stdout (exit 0)
# is added to the prompt's context. `chipset brief` prints nothing at all
# when nothing needs the agent, so an idle agent pays no tokens for it.
#
# Needs CHIPSET_AGENT (this agent's id); CHIPSET_ROOT if the state root is
# not .chipset/state under the project.
set -u
[ -n "${CHIPSET_AGENT:-}" ] || exit 0
brief=$(chipset brief "$CHIPSET_AGENT" 2>/dev/null) || exit 0 # never block a prompt
[ -n "$brief" ] || exit 0
printf 'chipset: waiting for you (agent %s):\n%s\n' "$CHIPSET_AGENT" "$brief"
