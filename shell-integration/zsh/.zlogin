# ptyvisor shell integration for zsh: a login shell's .zlogin, the last file zsh reads
# (see .zshenv here). ZDOTDIR stays the user's from here on.
_ptyvisor_to_user_zdotdir
[[ -r ${ZDOTDIR:-$HOME}/.zlogin ]] && builtin source "${ZDOTDIR:-$HOME}/.zlogin"
unset -f _ptyvisor_to_user_zdotdir _ptyvisor_to_our_zdotdir
unset _ptyvisor_dir _ptyvisor_user_zdotdir _ptyvisor_user_zdotdir_set
