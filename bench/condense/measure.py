#!/usr/bin/env python3
"""How much the MCP server's condensed output (src/cli/mcp/condensed_output.h) saves on real
noisy commands, and whether it keeps every line the terminal finally showed.

    bench/condense/measure.py [--build build/default] [--keep DIR] [--only NAME...]

Each command runs on a pseudo-terminal of 200x50 (TERM=xterm-256color) and its output is
recorded raw. The recording then goes (1) through bench's condense_file, with no budget, and
(2) into tmux, a real terminal emulator of the same size with a scrollback larger than the
output, whose `capture-pane -J` is what the terminal finally showed. The lines compared are
those with text (trailing blanks trimmed). "missing" counts lines tmux shows that the condensed
text lacks; "extra" counts condensed lines tmux does not show (a progress frame left behind,
say). "stripped" is the same for the text terminal_read gave before condensing (escape
sequences removed, each "\r" a newline): its bytes and its extra lines. Prints a Markdown table. Run as root: the apt install rows install and remove a small
package built here (offline); apt-get update needs the Debian mirror, npm the npm registry.
"""
import argparse
import fcntl
import os
import pty
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import time

COLS, ROWS = 200, 50


def deb_package(work):
    """A tiny package, condense-sample, built with dpkg-deb; its path."""
    root = os.path.join(work, "pkg")
    os.makedirs(os.path.join(root, "DEBIAN"))
    os.makedirs(os.path.join(root, "usr/share/condense-sample"))
    with open(os.path.join(root, "DEBIAN/control"), "w") as f:
        f.write("Package: condense-sample\nVersion: 1.0\nArchitecture: all\n"
                "Maintainer: ptyvisor bench <bench@localhost>\nDescription: bench sample\n")
    for i in range(200):
        with open(os.path.join(root, f"usr/share/condense-sample/file{i}"), "w") as f:
            f.write("x" * 1000)
    deb = os.path.join(work, "condense-sample_1.0_all.deb")
    subprocess.run(["dpkg-deb", "--build", root, deb], check=True, stdout=subprocess.DEVNULL)
    return deb


def scenarios(work):
    deb = deb_package(work)
    big = os.path.join(work, "big.bin")
    with open(big, "wb") as f:
        f.write(os.urandom(64 * 1024 * 1024))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    npm_dir = os.path.join(work, "npm")
    os.makedirs(npm_dir)
    return [
        ("apt-get install (local .deb)",
         f"apt-get install -y --reinstall {deb} && apt-get remove -y condense-sample"),
        ("apt install, fancy progress (local .deb)",
         f"apt install -y --reinstall {deb} && apt remove -y condense-sample"),
        ("apt-get update (Debian's mirror)", "apt-get update"),
        ("npm install express eslint",
         f"cd {npm_dir} && npm init -y >/dev/null && npm install --no-audit --no-fund express eslint"),
        ("curl -# (64 MiB over http at 16 MiB/s)",
         f"python3 -m http.server -b 127.0.0.1 -d {work} {port} >/dev/null 2>&1 & server=$!; sleep 1; "
         f"curl -# --limit-rate 16M -o /dev/null http://127.0.0.1:{port}/big.bin; kill $server"),
        ("dd status=progress (96 MiB in 6 s)",
         f"for i in 1 2 3 4 5 6; do head -c 16M {big}; sleep 1; done | dd of=/dev/null bs=64K status=progress"),
    ]


def record(command):
    """The raw bytes `command` writes to a 200x50 terminal."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.environ["COLUMNS"], os.environ["LINES"] = str(COLS), str(ROWS)
        os.execvp("/bin/sh", ["/bin/sh", "-c", command])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    out = bytearray()
    while True:
        try:
            ready, _, _ = select.select([fd], [], [], 600)
            if not ready:
                break
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the command and its terminal are gone
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    os.close(fd)
    return bytes(out)


def shown_by_tmux(raw_path):
    """The lines a 200x50 tmux with a large scrollback shows after `cat raw_path`."""
    sock = f"condense-{os.getpid()}"
    conf = raw_path + ".tmux.conf"
    with open(conf, "w") as f:
        f.write("set -g history-limit 1000000\nset -g status off\n")
    tmux = ["tmux", "-L", sock, "-f", conf]
    subprocess.run(tmux + ["new-session", "-d", "-x", str(COLS), "-y", str(ROWS),
                           f"stty raw -echo; cat {raw_path}; tmux -L {sock} wait-for -S shown; sleep 600"],
                   check=True)
    try:
        subprocess.run(tmux + ["wait-for", "shown"], check=True, timeout=120)
        time.sleep(0.2)  # the pane's last bytes are drawn
        return subprocess.run(tmux + ["capture-pane", "-p", "-J", "-S", "-1000000"], check=True,
                              capture_output=True, text=True, errors="replace").stdout
    finally:
        subprocess.run(tmux + ["kill-server"], check=False)


def lines_with_text(text):
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "../../build/default"))
    parser.add_argument("--keep", help="keep the recordings and texts in this directory")
    parser.add_argument("--only", nargs="*", help="scenarios whose name starts with one of these")
    args = parser.parse_args()
    condense = os.path.join(args.build, "bench/condense_file")
    if not os.access(condense, os.X_OK):
        sys.exit(f"measure.py: build bench/condense_file first ({condense})")
    work = tempfile.mkdtemp(prefix="condense-measure.")
    try:
        print("| output | raw bytes | condensed bytes | ratio | lines shown | missing | extra "
              "| stripped bytes | stripped extra |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for i, (name, command) in enumerate(scenarios(work)):
            if args.only and not any(name.startswith(o) for o in args.only):
                continue
            raw = record(command)
            raw_path = os.path.join(work, f"{i}.raw")
            with open(raw_path, "wb") as f:
                f.write(raw)
            text = subprocess.run([condense, raw_path], check=True, capture_output=True).stdout.decode(
                "utf-8", "replace")
            stripped = subprocess.run([condense, "--strip", raw_path], check=True, capture_output=True).stdout.decode(
                "utf-8", "replace")
            shown = lines_with_text(shown_by_tmux(raw_path))
            condensed = lines_with_text(text)
            missing = [line for line in shown if line not in set(condensed)]
            extra = [line for line in condensed if line not in set(shown)]
            stripped_extra = [line for line in lines_with_text(stripped) if line not in set(shown)]
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                shutil.copy(raw_path, os.path.join(args.keep, f"{i}.raw"))
                with open(os.path.join(args.keep, f"{i}.condensed"), "w") as f:
                    f.write(text)
                with open(os.path.join(args.keep, f"{i}.shown"), "w") as f:
                    f.write("\n".join(shown) + "\n")
            ratio = f"{len(text.encode()) / len(raw):.1%}" if raw else "-"
            print(f"| {name} | {len(raw)} | {len(text.encode())} | {ratio} | {len(shown)} | {len(missing)} | {len(extra)} "
                  f"| {len(stripped.encode())} | {len(stripped_extra)} |",
                  flush=True)
            for line in missing[:5]:
                print(f"  missing: {line[:150]!r}", file=sys.stderr)
            for line in extra[:5]:
                print(f"  extra: {line[:150]!r}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
