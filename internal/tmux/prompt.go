package tmux

//go:generate go run genprompt.go

// probeKey is the readline key sequence bound to the probe: C-x C-].
// It is unbound in bash's default emacs keymap, so a bash without the
// integration ignores it (TestRunWithoutIntegration checks).
const probeKey = "\x18\x1d"

// PromptIntegration is the text of containers/files/shell/stem-prompt.sh (a
// test keeps the two identical). The container images source it from
// /etc/bash.bashrc; Run and Marks depend on the marks it writes, each ending
// with the shell's KEY (listed in the pane option @stem_keys):
//
//	ESC ] 133 ; A ; KEY BEL                  a prompt follows
//	ESC ] 133 ; A ; k=s ; KEY BEL            a continuation prompt (PS2) follows
//	ESC ] 133 ; C ; KEY BEL                  a command line was accepted
//	ESC ] 133 ; D ; STATUS ; KEY BEL         the last command finished
//	ESC ] 133 ; stem-probe ; N ; MAP ; FIXED ; KEY BEL
//	                                         answer to the probe key
const PromptIntegration = `# stem shell integration for interactive bash. The container images source
# this file from /etc/bash.bashrc; stem's tmux client (internal/tmux) relies
# on it to run commands in a pane and to know when they finish.
#
# It writes OSC 133 marks to the terminal. tmux does not display OSC 133,
# so nothing shows in the pane, but the marks reach tmux control clients in
# %output. Each mark ends with this shell's KEY:
#   ESC ] 133 ; A ; KEY BEL         a prompt follows
#   ESC ] 133 ; A ; k=s ; KEY BEL   a continuation prompt (PS2) follows
#   ESC ] 133 ; C ; KEY BEL         a command line was accepted; its output follows
#   ESC ] 133 ; D ; STATUS ; KEY BEL
#                                   the last command finished with STATUS
#   ESC ] 133 ; stem-probe ; N ; KEYMAP ; FIXED ; KEY BEL
#                                   answer to the probe key C-x C-]: bash is
#                                   reading a command line that holds N
#                                   characters, in readline keymap KEYMAP
#                                   (emacs, vi-insert or vi-command); FIXED
#                                   is 1 if the hooks had to be put back
#                                   (PS0 then takes effect from the next
#                                   prompt on)
# KEY is 16 random hex digits, kept in a shell variable that is never
# exported, and appended to the pane's tmux option @stem_keys when the shell
# starts. stem counts only marks whose key the pane lists, so a program's
# output (a file being printed, a test's log) cannot forge the end of a
# command or its exit status.
#
# Nothing here adds to the shell history. The only program started is one
# tmux set-option, once, when the shell starts. The probe is a readline
# binding, so it answers only while bash is at its prompt, and it puts the
# hooks back (first in PROMPT_COMMAND) if a later rc file changed them.

[ -n "${BASH_VERSION-}" ] || return 0
case $- in *i*) ;; *) return 0 ;; esac

# A key of this shell's own: a new one unless this shell already made it
# (the rc file sourced twice); one that arrived exported came from a parent,
# and one that was unset or changed is made afresh (the probe checks too).
__stem_key_init() {
	[[ ${__stem_key-} =~ ^[0-9a-f]{16}$ && ${__stem_key@a} != *x* ]] && return 0
	printf -v __stem_key '%08x%08x' "$SRANDOM" "$SRANDOM"
	export -n __stem_key
	if [[ -n ${TMUX-} && -n ${TMUX_PANE-} ]]; then
		command tmux set-option -p -t "$TMUX_PANE" -a @stem_keys " $__stem_key" 2>/dev/null
	fi
	return 1
}
__stem_key_init

__stem_prompt_command() {
	local __stem_status=$?
	printf '\033]133;D;%s;%s\007\033]133;A;%s\007' "$__stem_status" "$__stem_key" "$__stem_key"
	return "$__stem_status"
}

__stem_install() {
	local pc
	__stem_fixed=0
	__stem_key_init || __stem_fixed=1
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
	case ${PS0-} in *"133;C;$__stem_key"*) ;; *) PS0=${PS0-}$'\033]133;C;'$__stem_key$'\007' __stem_fixed=1 ;; esac
	case ${PS2-} in *"133;A;k=s;$__stem_key"*) ;; *) PS2='\[\033]133;A;k=s;'$__stem_key'\007\]'${PS2-'> '} __stem_fixed=1 ;; esac
}

__stem_probe() {
	__stem_install
	printf '\033]133;stem-probe;%s;%s;%s;%s\007' "${#READLINE_LINE}" "$1" "$__stem_fixed" "$__stem_key"
}

__stem_install
bind -m emacs -x '"\C-x\C-]": __stem_probe emacs' 2>/dev/null
bind -m vi-insert -x '"\C-x\C-]": __stem_probe vi-insert' 2>/dev/null
bind -m vi-command -x '"\C-x\C-]": __stem_probe vi-command' 2>/dev/null
`
