# ptyvisor shell integration for zsh: the interactive shell's .zshrc (see .zshenv here).
# After the user's .zshrc it installs the hooks that write the marks ptyvisor's screen
# worker turns into command records:
#   OSC 133;A at the start of PS1 and OSC 133;B at its end;
#   OSC 133;C;cmdline_url=... from the last preexec hook, which zsh runs after the line was
#     read, echoed and ended with its newline, just before the command runs;
#   OSC 133;D;N from the first precmd hook, only for a command that had its C;
#   OSC 7 with the working directory after it.

_ptyvisor_to_user_zdotdir
[[ -r ${ZDOTDIR:-$HOME}/.zshrc ]] && builtin source "${ZDOTDIR:-$HOME}/.zshrc"
if [[ -o login ]]; then
    _ptyvisor_to_our_zdotdir  # .zlogin is still to come
else
    unset -f _ptyvisor_to_user_zdotdir _ptyvisor_to_our_zdotdir
    unset _ptyvisor_dir _ptyvisor_user_zdotdir _ptyvisor_user_zdotdir_set
fi

# Once per shell: a user's .zshrc that sources this file again would wrap PS1 twice.
if [[ -z ${_ptyvisor_integrated-} ]]; then
_ptyvisor_integrated=1

# %{ %} tell zle the mark takes no column.
_ptyvisor_prompt_start=$'%{\e]133;A\e\\%}'
_ptyvisor_prompt_end=$'%{\e]133;B\e\\%}'

# Percent-encodes $1 byte by byte into _ptyvisor_encoded: every byte but [A-Za-z0-9-._~/].
_ptyvisor_encode() {
    emulate -L zsh
    setopt no_multibyte
    local s=$1 c hex
    local -i i
    _ptyvisor_encoded=
    for (( i = 1; i <= ${#s}; i++ )); do
        c=${s[i]}
        if [[ $c == [A-Za-z0-9._~/-] ]]; then
            _ptyvisor_encoded+=$c
        else
            printf -v hex '%%%02X' "'$c"
            _ptyvisor_encoded+=$hex
        fi
    done
}

# zsh prints PROMPT_SP's mark for output without a final newline ("%" and spaces, then
# "\r") before it runs any precmd hook, so D would come after it. The option is therefore
# kept off and the first precmd hook prints the same bytes itself, after D, when the user
# had it on (zsh's default). The user's choice is read at the end of their .zshrc and again
# whenever they turn it on.
_ptyvisor_prompt_sp=
if [[ -o prompt_sp ]]; then
    _ptyvisor_prompt_sp=1
    unsetopt prompt_sp
fi
_ptyvisor_print_prompt_sp() {
    emulate -L zsh
    local mark=${PROMPT_EOL_MARK-'%B%S%#%s%b'}
    # The width of the mark: the text left once the attribute sequences are taken out.
    local zero='%([BSUbfksu]|([FK]|){*})'
    local -i width=${#${(S%%)mark//$~zero/}}
    local -i pad=$(( COLUMNS - width ))
    (( pad < 0 )) && pad=0
    print -rn -- "${(%)mark}${(l:pad:: :)}"$'\r'"${(l:width:: :)}"$'\r'
}

_ptyvisor_ran=
_ptyvisor_precmd() {
    local -i exit_status=$?
    # The user's options are read (and PROMPT_SP turned off for good) before emulate -L
    # gives this function zsh's defaults.
    if [[ -o prompt_sp ]]; then
        _ptyvisor_prompt_sp=1
        unsetopt prompt_sp
    fi
    local prompt_cr=
    [[ -o prompt_cr ]] && prompt_cr=1
    emulate -L zsh
    if [[ -n $_ptyvisor_ran ]]; then
        print -rn -- $'\e]133;D;'$exit_status$'\e\\'
    fi
    _ptyvisor_ran=
    [[ -n $_ptyvisor_prompt_sp && -n $prompt_cr ]] && _ptyvisor_print_prompt_sp
    _ptyvisor_encode "$PWD"
    print -rn -- $'\e]7;file://'${HOST-}$_ptyvisor_encoded$'\e\\'
    return $exit_status
}

# Runs after the user's precmd hooks, which may set PS1 (prompt themes do): puts the marks
# around PS1 again when something replaced it, e.g. `PS1='new> '`, and our hooks back in
# their places.
_ptyvisor_wrap_prompt() {
    local -i exit_status=$?
    emulate -L zsh
    _ptyvisor_keep_order
    if [[ -z ${_ptyvisor_wrapped_ps1+set} || $PS1 != "$_ptyvisor_wrapped_ps1" ]]; then
        PS1=$_ptyvisor_prompt_start$PS1$_ptyvisor_prompt_end
        _ptyvisor_wrapped_ps1=$PS1
    fi
    return $exit_status
}

# $1 is the line as typed whenever history is on (zsh passes it even when HIST_IGNORE_SPACE
# keeps it out of the history); $3, the text being run, otherwise.
_ptyvisor_preexec() {
    emulate -L zsh
    _ptyvisor_encode "${1:-$3}"
    print -rn -- $'\e]133;C;cmdline_url='$_ptyvisor_encoded$'\e\\'
    _ptyvisor_ran=1
}

# D first, the prompt's marks last. zsh runs a function named precmd before the
# precmd_functions array: it becomes an entry of the array, after ours. Done at the end of
# the user's .zshrc and again after each prompt's hooks, for what the user adds later.
_ptyvisor_keep_order() {
    emulate -L zsh
    if (( ${+functions[precmd]} )); then
        [[ $functions[precmd] == *'builtin autoload -X'* ]] && autoload +X precmd
        functions[_ptyvisor_user_precmd]=$functions[precmd]
        unfunction precmd
        precmd_functions=(_ptyvisor_user_precmd ${precmd_functions:#_ptyvisor_user_precmd})
    fi
    if [[ ${precmd_functions[1]-} != _ptyvisor_precmd || ${precmd_functions[-1]-} != _ptyvisor_wrap_prompt ]]; then
        precmd_functions=(_ptyvisor_precmd ${precmd_functions:#_ptyvisor_(precmd|wrap_prompt)} _ptyvisor_wrap_prompt)
    fi
}

autoload -Uz add-zsh-hook
add-zsh-hook precmd _ptyvisor_precmd
add-zsh-hook precmd _ptyvisor_wrap_prompt
add-zsh-hook preexec _ptyvisor_preexec  # the last preexec hook: C right before the command
_ptyvisor_keep_order
fi
