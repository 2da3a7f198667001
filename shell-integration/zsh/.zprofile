# ptyvisor shell integration for zsh: a login shell's .zprofile (see .zshenv here).
_ptyvisor_to_user_zdotdir
[[ -r ${ZDOTDIR:-$HOME}/.zprofile ]] && builtin source "${ZDOTDIR:-$HOME}/.zprofile"
_ptyvisor_to_our_zdotdir
