package tmux

//go:generate go run genprompt.go

// probeKey is the readline key sequence bound to the probe: C-x C-].
// It is unbound in bash's default emacs keymap, so a bash without the
// integration ignores it (TestRunWithoutIntegration checks).
const probeKey = "\x18\x1d"

// PromptIntegration is the text of containers/files/shell/stem-prompt.sh (a
// test keeps the two identical). The container images source it from
// /etc/bash.bashrc; Run depends on the marks it writes:
//
//	ESC ] 133 ; A BEL                  a prompt follows
//	ESC ] 133 ; A ; k=s BEL            a continuation prompt (PS2) follows
//	ESC ] 133 ; C BEL                  a command line was accepted
//	ESC ] 133 ; D ; STATUS BEL         the last command finished
//	ESC ] 133 ; stem-probe ; N ; MAP ; FIXED BEL
//	                                   answer to the probe key
const PromptIntegration = `# stem shell integration for interactive bash. The container images source
# this file from /etc/bash.bashrc; stem's tmux client (internal/tmux) relies
# on it to run commands in a pane and to know when they finish.
#
# It writes OSC 133 marks to the terminal. tmux does not display OSC 133,
# so nothing shows in the pane, but the marks reach tmux control clients in
# %output:
#   ESC ] 133 ; A BEL               a prompt follows
#   ESC ] 133 ; A ; k=s BEL         a continuation prompt (PS2) follows
#   ESC ] 133 ; C BEL               a command line was accepted; its output follows
#   ESC ] 133 ; D ; STATUS BEL      the last command finished with STATUS
#   ESC ] 133 ; stem-probe ; N ; KEYMAP ; FIXED BEL
#                                   answer to the probe key C-x C-]: bash is
#                                   reading a command line that holds N
#                                   characters, in readline keymap KEYMAP
#                                   (emacs, vi-insert or vi-command); FIXED
#                                   is 1 if the hooks had to be put back
#                                   (PS0 then takes effect from the next
#                                   prompt on)
# Nothing here starts a program or adds to the shell history. The probe is a
# readline binding, so it answers only while bash is at its prompt, and it
# puts the hooks back (first in PROMPT_COMMAND) if a later rc file changed
# them.

[ -n "${BASH_VERSION-}" ] || return 0
case $- in *i*) ;; *) return 0 ;; esac

__stem_prompt_command() {
	local __stem_status=$?
	printf '\033]133;D;%s\007\033]133;A\007' "$__stem_status"
	return "$__stem_status"
}

__stem_install() {
	local pc
	__stem_fixed=0
	if [[ ${PROMPT_COMMAND@a} == *a* ]]; then
		if [[ ${PROMPT_COMMAND[0]} != __stem_prompt_command ]]; then
			local -a rest=()
			for pc in "${PROMPT_COMMAND[@]}"; do
				[[ $pc == __stem_prompt_command ]] || rest+=("$pc")
			done
			PROMPT_COMMAND=(__stem_prompt_command "${rest[@]}")
			__stem_fixed=1
		fi
	elif [[ ${PROMPT_COMMAND-} != __stem_prompt_command* ]]; then
		pc=${PROMPT_COMMAND-}
		pc=${pc//__stem_prompt_command;/}
		pc=${pc%;__stem_prompt_command}
		[[ $pc == __stem_prompt_command ]] && pc=
		PROMPT_COMMAND="__stem_prompt_command${pc:+;$pc}"
		__stem_fixed=1
	fi
	case ${PS0-} in *'133;C'*) ;; *) PS0=${PS0-}$'\033]133;C\007' __stem_fixed=1 ;; esac
	case ${PS2-} in *'133;A;k=s'*) ;; *) PS2='\[\033]133;A;k=s\007\]'${PS2-'> '} __stem_fixed=1 ;; esac
}

__stem_probe() {
	__stem_install
	printf '\033]133;stem-probe;%s;%s;%s\007' "${#READLINE_LINE}" "$1" "$__stem_fixed"
}

__stem_install
bind -m emacs -x '"\C-x\C-]": __stem_probe emacs' 2>/dev/null
bind -m vi-insert -x '"\C-x\C-]": __stem_probe vi-insert' 2>/dev/null
bind -m vi-command -x '"\C-x\C-]": __stem_probe vi-command' 2>/dev/null
`
