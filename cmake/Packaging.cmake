# Packaging.cmake: install rules for the operations files (systemd units, tmpfiles.d entry,
# man pages, configuration, documentation) and the CPack configuration of the Debian package.
#
# Included last from the top-level CMakeLists.txt, after add_subdirectory(src), whose
# install(TARGETS) rules put ptyvisord in sbin and ptyvisor in bin. Then:
#   cmake --build build/default --target package      (or: cd build/default && cpack -G DEB)
# makes build/default/ptyvisor_<version>_<arch>.deb. scripts/test-package.sh checks it.
#
# Binaries, man pages and documentation go under the install prefix (/usr in the package).
# Units, the tmpfiles.d entry and /etc are where systemd and the daemon look for them, which
# does not depend on the prefix: they are absolute, and cache variables so that a distribution
# with other paths can change them.

include(GNUInstallDirs)
get_filename_component(PTYVISOR_SOURCE_ROOT "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)

set(PTYVISOR_SYSTEMD_UNIT_DIR "/lib/systemd/system" CACHE STRING
    "Where ptyvisord.service and ptyvisord.socket are installed")
set(PTYVISOR_TMPFILES_DIR "/usr/lib/tmpfiles.d" CACHE STRING
    "Where the tmpfiles.d entry is installed (as ptyvisor.conf)")
set(PTYVISOR_SYSCONF_DIR "/etc" CACHE STRING
    "Where the ptyvisor/ptyvisord.toml configuration file is installed")
set(PTYVISOR_PACKAGE_MAINTAINER "ptyvisor maintainers <root@localhost>" CACHE STRING
    "Maintainer field of the Debian package")

# --- install rules -----------------------------------------------------------------------
install(FILES "${PTYVISOR_SOURCE_ROOT}/systemd/ptyvisord.service"
              "${PTYVISOR_SOURCE_ROOT}/systemd/ptyvisord.socket"
        DESTINATION "${PTYVISOR_SYSTEMD_UNIT_DIR}")
install(FILES "${PTYVISOR_SOURCE_ROOT}/systemd/ptyvisor.tmpfiles"
        DESTINATION "${PTYVISOR_TMPFILES_DIR}" RENAME ptyvisor.conf)
# The configuration as installed: every key commented out, `user` to be set by the admin.
# A conffile of the package (see CONTROL_EXTRA below): dpkg keeps local edits on upgrade.
install(FILES "${PTYVISOR_SOURCE_ROOT}/systemd/ptyvisord.default.toml"
        DESTINATION "${PTYVISOR_SYSCONF_DIR}/ptyvisor" RENAME ptyvisord.toml)
install(FILES "${PTYVISOR_SOURCE_ROOT}/man/ptyvisor.1" DESTINATION "${CMAKE_INSTALL_MANDIR}/man1")
install(FILES "${PTYVISOR_SOURCE_ROOT}/man/ptyvisord.toml.5" DESTINATION "${CMAKE_INSTALL_MANDIR}/man5")
install(FILES "${PTYVISOR_SOURCE_ROOT}/man/ptyvisord.8" DESTINATION "${CMAKE_INSTALL_MANDIR}/man8")
install(FILES "${PTYVISOR_SOURCE_ROOT}/etc/ptyvisord.toml" DESTINATION "${CMAKE_INSTALL_DOCDIR}/examples")
install(FILES "${PTYVISOR_SOURCE_ROOT}/README.md"
              "${PTYVISOR_SOURCE_ROOT}/docs/configuration.md"
              "${PTYVISOR_SOURCE_ROOT}/docs/operations.md"
        DESTINATION "${CMAKE_INSTALL_DOCDIR}")

# --- maintainer scripts --------------------------------------------------------------------
# As debhelper would write them, minus enabling: nothing starts before the admin has set the
# account. An upgrade restarts a running daemon; with FileDescriptorStoreMax= in the unit (the
# default) its running sessions go on under the new binary (docs/operations.md, "What
# survives what"); without it they end with reason "shutdown".
set(_pv_debian "${CMAKE_CURRENT_BINARY_DIR}/debian")
file(MAKE_DIRECTORY "${_pv_debian}")
file(WRITE "${_pv_debian}/conffiles" "${PTYVISOR_SYSCONF_DIR}/ptyvisor/ptyvisord.toml\n")
file(WRITE "${_pv_debian}/postinst" [=[#!/bin/sh
set -e
if [ "$1" = configure ]; then
    if command -v systemd-tmpfiles >/dev/null 2>&1; then
        systemd-tmpfiles --create ptyvisor.conf || true
    fi
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload || true
        if [ -n "$2" ]; then
            # An upgrade: a running daemon must not keep running the old binary.
            systemctl try-restart ptyvisord.service || true
        fi
    fi
fi
exit 0
]=])
file(WRITE "${_pv_debian}/prerm" [=[#!/bin/sh
set -e
if [ "$1" = remove ]; then
    if [ -d /run/systemd/system ]; then
        systemctl stop ptyvisord.socket ptyvisord.service || true
    fi
    systemctl --no-reload disable ptyvisord.socket ptyvisord.service >/dev/null 2>&1 || true
fi
exit 0
]=])
file(WRITE "${_pv_debian}/postrm" [=[#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
    systemctl daemon-reload || true
fi
if [ "$1" = purge ]; then
    rm -rf /var/lib/ptyvisor
    rmdir /run/ptyvisor 2>/dev/null || true
fi
exit 0
]=])

# --- CPack -----------------------------------------------------------------------------------
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "ptyvisor")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_VENDOR "ptyvisor")
set(CPACK_PACKAGE_CONTACT "${PTYVISOR_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "privileged PTY session supervisor for AI coding agents")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_PACKAGE_NAME "ptyvisor")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${PTYVISOR_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SECTION "admin")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
# The summary above is the first line of the control file's Description; this is the rest,
# which CPack indents (an empty line becomes " .").
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION [=[ptyvisord is a root daemon that gives the account of an AI coding agent real
interactive terminals and nothing else. It authenticates the agent process from
what the kernel says about it (credentials, pidfd, the MainPID of an allowed
unit), runs each command on a fresh PTY in a transient systemd unit of its own
as that account, and relays bytes both ways over one Unix socket connection.

ptyvisor is the client: `ptyvisor run -- CMD` behaves like `systemd-run --pty`.]=])
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "systemd")
# libsystemd0 carries sd-event, sd-bus, sd-daemon and sd-journal. dpkg-shlibdeps, when it is
# there, lists it with the other shared libraries and their minimal versions; without it the
# dependency is stated by hand.
find_program(PTYVISOR_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(PTYVISOR_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libsystemd0 (>= 247), libtomlplusplus3 (>= 3.2.0), libre2-9")
endif()
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${_pv_debian}/conffiles;${_pv_debian}/postinst;${_pv_debian}/prerm;${_pv_debian}/postrm")
# Modes from policy (0644 conffiles, 0755 scripts), whatever the files' own modes are.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_SOURCE_GENERATOR "TGZ")
set(CPACK_SOURCE_IGNORE_FILES "/\\\\.git/" "/build/" "/\\\\.cache/")

include(CPack)
