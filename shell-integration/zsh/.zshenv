# ptyvisor shell integration for zsh (README.md beside this directory).
#
# The daemon starts zsh with ZDOTDIR pointing at this directory and the user's own ZDOTDIR
# in PTYVISOR_USER_ZDOTDIR (absent: the user has none, zsh reads $HOME). zsh then reads
# .zshenv, .zprofile (login), .zshrc (interactive) and .zlogin (login) from here; each of
# them gives ZDOTDIR back to the user, reads the user's file of the same name where zsh would
# have read it, and points ZDOTDIR here again while one of our files is still to come.
# The user's files are sourced at the top level of these files, not from a function, so that
# their `typeset` and `local` mean what they would mean when zsh reads them.

_ptyvisor_dir=$ZDOTDIR
if [[ -n ${PTYVISOR_USER_ZDOTDIR+set} ]]; then
    _ptyvisor_user_zdotdir=$PTYVISOR_USER_ZDOTDIR
    _ptyvisor_user_zdotdir_set=1
else
    _ptyvisor_user_zdotdir=
    _ptyvisor_user_zdotdir_set=
fi
unset PTYVISOR_USER_ZDOTDIR

# ZDOTDIR as the user has it (unset when the user has none).
_ptyvisor_to_user_zdotdir() {
    if [[ -n $_ptyvisor_user_zdotdir_set ]]; then
        export ZDOTDIR=$_ptyvisor_user_zdotdir
    else
        unset ZDOTDIR
    fi
}

# Keeps what the user's file made of ZDOTDIR (a ~/.zshenv often sets it), then points
# ZDOTDIR here so that zsh reads our next file.
_ptyvisor_to_our_zdotdir() {
    if [[ -n ${ZDOTDIR+set} ]]; then
        _ptyvisor_user_zdotdir=$ZDOTDIR
        _ptyvisor_user_zdotdir_set=1
    else
        _ptyvisor_user_zdotdir=
        _ptyvisor_user_zdotdir_set=
    fi
    export ZDOTDIR=$_ptyvisor_dir
}

_ptyvisor_to_user_zdotdir
[[ -r ${ZDOTDIR:-$HOME}/.zshenv ]] && builtin source "${ZDOTDIR:-$HOME}/.zshenv"
_ptyvisor_to_our_zdotdir
