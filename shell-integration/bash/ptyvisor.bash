# ptyvisor shell integration for bash: the rcfile of `bash --rcfile THIS -i`.
#
# It reads the user's own startup files, then makes bash write the marks that ptyvisor's
# screen worker turns into command records (README.md beside this directory):
#   OSC 133;A at the start of PS1 and OSC 133;B at its end;
#   OSC 133;C;cmdline_url=... at the end of PS0 (bash prints PS0 after the line was read,
#     echoed and ended with its newline, just before the command runs);
#   OSC 133;D;N from the first entry of PROMPT_COMMAND, before anything else bash or the
#     user's entries print, and only for a command that had its C;
#   OSC 7 with the working directory right after it.
# Every name here starts with _ptyvisor_ and every expansion of a variable that is not ours
# has a default, so that a user's `set -u` holds.

[[ $- == *i* ]] || return 0
# Sourced twice (a user's rc sourcing it again) would wrap PS1 twice.
[[ -z ${_ptyvisor_integrated-} ]] || return 0

# --- the user's startup files, as bash would have read them -------------------------------
# `bash --rcfile X -i` still reads the compiled-in system file (/etc/bash.bashrc on Debian)
# before X and reads X instead of ~/.bashrc, so an interactive shell reads ~/.bashrc here.
# A login shell would read /etc/profile and the first of the three profiles instead; bash
# does not read an rcfile when it is a login shell, so login is asked for through the
# environment and its files are read here (they may read /etc/bash.bashrc once more).
_ptyvisor_login=${PTYVISOR_SHELL_LOGIN-}
unset PTYVISOR_SHELL_LOGIN
if [[ $_ptyvisor_login == 1 ]]; then
    [[ -r /etc/profile ]] && . /etc/profile
    for _ptyvisor_file in ~/.bash_profile ~/.bash_login ~/.profile; do
        if [[ -r $_ptyvisor_file ]]; then
            . "$_ptyvisor_file"
            break
        fi
    done
    unset _ptyvisor_file
else
    [[ -r ~/.bashrc ]] && . ~/.bashrc
fi
unset _ptyvisor_login

_ptyvisor_integrated=1

# --- marks ----------------------------------------------------------------------------------
# As PS1 text: \[ \] tell readline the mark takes no column; the ST's backslash is \\ there.
_ptyvisor_prompt_start='\[\e]133;A\e\\\]'
_ptyvisor_prompt_end='\[\e]133;B\e\\\]'

# Percent-encodes $1 byte by byte into _ptyvisor_encoded: every byte but [A-Za-z0-9-._~/].
# LC_ALL=C makes ${#s} and ${s:i:1} count bytes, and printf "'c" give a byte's value.
_ptyvisor_encode() {
    local LC_ALL=C s=$1 c hex i
    _ptyvisor_encoded=
    for ((i = 0; i < ${#s}; i++)); do
        c=${s:i:1}
        case $c in
            [A-Za-z0-9._~/-]) _ptyvisor_encoded+=$c ;;
            *) printf -v hex '%%%02X' "'$c"; _ptyvisor_encoded+=$hex ;;
        esac
    done
}

# The command line, exactly as typed, is taken from readline: Enter runs a macro that first
# calls _ptyvisor_capture (bind -x, which sees the whole buffer in READLINE_LINE) and then
# accept-line. History alone cannot give it: HISTCONTROL=ignorespace, HISTIGNORE or
# `set +o history` keep lines out of it. A command of several lines (PS2, a here-document)
# passes here once per line; the lines are joined with a newline until the command runs.
# bind -x makes readline redraw the line (and so PS1, with its A and B) once more before the
# line is accepted: a prompt may carry A and B twice before its C.
_ptyvisor_line=
_ptyvisor_have_line=
_ptyvisor_capture() {
    if [[ -n $_ptyvisor_have_line ]]; then
        _ptyvisor_line+=$'\n'$READLINE_LINE
    else
        _ptyvisor_line=$READLINE_LINE
        _ptyvisor_have_line=1
    fi
    _ptyvisor_encode "$_ptyvisor_line"
    _ptyvisor_command_mark=$'\e]133;C;cmdline_url='$_ptyvisor_encoded$'\e\\'
}
# PS0 shows this variable: empty until a line was captured.
_ptyvisor_command_mark=

# Without readline (bash --noediting, `set +o emacs +o vi`), Enter is not ours: the line is
# then the last history entry, the best there is.
_ptyvisor_command_mark_from_history() {
    local line
    line=$(HISTTIMEFORMAT= builtin history 1)
    line=${line#*[0-9][* ] }
    _ptyvisor_encode "$line"
    printf '\e]133;C;cmdline_url=%s\e\\' "$_ptyvisor_encoded"
}

# Key sequences nobody types, bound in every keymap so that `set -o vi` keeps working. The
# macro's keys are read before any typed-ahead input. bind warns when the user's files turned
# line editing off; the bindings are made all the same.
for _ptyvisor_keymap in emacs vi-insert vi-command; do
    {
        bind -m "$_ptyvisor_keymap" -x '"\e[5963~": _ptyvisor_capture'
        bind -m "$_ptyvisor_keymap" '"\e[5964~": accept-line'
        bind -m "$_ptyvisor_keymap" '"\C-m": "\e[5963~\e[5964~"'
        bind -m "$_ptyvisor_keymap" '"\C-j": "\e[5963~\e[5964~"'
    } 2>/dev/null
done
unset _ptyvisor_keymap

# PS0 ends with the C mark. `${_ptyvisor_command_mark:0:(_ptyvisor_ran=1,0)}` expands to
# nothing and records, in this shell (no subshell), that PS0 was shown: bash shows PS0 only
# for a line that has a command, and D is owed exactly then.
_ptyvisor_ps0_suffix='${_ptyvisor_command_mark:-$(_ptyvisor_command_mark_from_history)}${_ptyvisor_command_mark:0:(_ptyvisor_ran=1,0)}'
_ptyvisor_ran=

# First entry of PROMPT_COMMAND: D (if a command ran) and OSC 7, then $? is given back to
# the user's entries and PS1. Once per prompt: an entry of the user's may call it again (see
# _ptyvisor_keep_order).
_ptyvisor_prompt_done=
_ptyvisor_precmd() {
    local status=$?
    if [[ -z $_ptyvisor_prompt_done ]]; then
        _ptyvisor_prompt_done=1
        if [[ -n $_ptyvisor_ran ]]; then
            printf '\e]133;D;%s\e\\' "$status"
        fi
        _ptyvisor_ran=
        _ptyvisor_line=
        _ptyvisor_have_line=
        _ptyvisor_command_mark=
        _ptyvisor_encode "$PWD"
        printf '\e]7;file://%s%s\e\\' "${HOSTNAME-}" "$_ptyvisor_encoded"
    fi
    return "$status"
}

# Tools that install themselves from PROMPT_COMMAND at the first prompt (bash-preexec and
# the prompts built on it) assign PROMPT_COMMAND as a string, which replaces its first
# element, ours, usually with a string that calls ours among theirs. Putting our entries back
# first and last keeps D the first output after a command from the next prompt on.
_ptyvisor_keep_order() {
    local entry
    local -a entries=()
    if [[ ${PROMPT_COMMAND+${PROMPT_COMMAND@a}} == *a* &&
          ${PROMPT_COMMAND[0]-} == _ptyvisor_precmd &&
          ${PROMPT_COMMAND[*]: -1} == _ptyvisor_postcmd ]]; then
        return 0
    fi
    for entry in "${PROMPT_COMMAND[@]}"; do
        [[ -z $entry || $entry == _ptyvisor_precmd || $entry == _ptyvisor_postcmd ]] || entries+=("$entry")
    done
    PROMPT_COMMAND=(_ptyvisor_precmd "${entries[@]}" _ptyvisor_postcmd)
}

# Last entry of PROMPT_COMMAND, after the user's entries (which may set PS1, like prompt
# themes do): puts the marks around PS1 and at the end of PS0 again when something replaced
# them, e.g. `PS1='new> '`.
# The _ptyvisor_wrapped_ variables are what PS1 and PS0 were once wrapped: unset until then.
_ptyvisor_postcmd() {
    local status=$?
    _ptyvisor_prompt_done=
    _ptyvisor_keep_order
    if [[ -z ${_ptyvisor_wrapped_ps1+set} || ${PS1-} != "$_ptyvisor_wrapped_ps1" ]]; then
        PS1=$_ptyvisor_prompt_start${PS1-}$_ptyvisor_prompt_end
        _ptyvisor_wrapped_ps1=$PS1
    fi
    if [[ -z ${_ptyvisor_wrapped_ps0+set} || ${PS0-} != "$_ptyvisor_wrapped_ps0" ]]; then
        PS0=${PS0-}$_ptyvisor_ps0_suffix
        _ptyvisor_wrapped_ps0=$PS0
    fi
    return "$status"
}

# PROMPT_COMMAND becomes an array (bash 5.1+): ours first, the user's entries (an array's
# elements, or the string as one element), ours last.
if [[ -z ${PROMPT_COMMAND+set} ]]; then
    PROMPT_COMMAND=()
elif [[ ${PROMPT_COMMAND@a} != *a* ]]; then
    PROMPT_COMMAND=("$PROMPT_COMMAND")
fi
_ptyvisor_keep_order
