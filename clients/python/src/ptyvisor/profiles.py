"""Sandbox profiles at START (protocol version 6, section 13).

A START names a profile only in version 6 (an older connection's `profile` is ignored and the
session gets the configuration's default), so a client speaks version 6 only when one is
named: without one it keeps working against an older daemon. A daemon older than version 6
refuses the header with unsupported_version, which profile_refusal() turns into a message that
says what is missing.
"""

from __future__ import annotations

from . import protocol
from .commands import commands_refusal
from .errors import UnsupportedVersion

MAX_PROFILE_BYTES = 64   # START's `profile` bound (13.1)


def check_profile(profile: str | None) -> str | None:
    """START's `profile`: None (the daemon's default), or a name of 1..64 bytes. The daemon
    judges whether the name is allowed (profile_not_allowed); this only keeps a frame the
    daemon would refuse as malformed from being sent."""
    if profile is None:
        return None
    if not isinstance(profile, str) or not profile:
        raise ValueError(f"a profile is a non-empty string, not {profile!r}")
    if len(profile.encode("utf-8", "surrogatepass")) > MAX_PROFILE_BYTES:
        raise ValueError(f"a profile name is at most {MAX_PROFILE_BYTES} bytes")
    return profile


def start_version(shell_integration: bool, profile: str | None = None) -> int:
    """START's connection version: the oldest that reads every member asked for
    (`shell_integration` from version 4, 11; `profile` from version 6, 13)."""
    if profile is not None:
        return protocol.PROFILES_VERSION
    return protocol.COMMANDS_VERSION if shell_integration else protocol.VERSION


def profile_refusal(error: UnsupportedVersion, call: str) -> UnsupportedVersion:
    """A daemon older than version 6 refuses the header with unsupported_version (section 8):
    a named profile has no older form, since an older START would run the session under the
    default profile instead of the one asked for."""
    return UnsupportedVersion("the daemon does not offer sandbox profiles (protocol version 6, "
                              f"which {call} needs: upgrade ptyvisord); it said: "
                              f"{error.message}")


def start_refusal(error: UnsupportedVersion, call: str, shell_integration: bool,
                  profile: str | None) -> UnsupportedVersion:
    """The refusal of a START's version: says which of its options the daemon lacks."""
    if profile is not None:
        return profile_refusal(error, f"{call}(profile=...)")
    if shell_integration:
        return commands_refusal(error, f"{call}(shell_integration=True)")
    return error
