"""snapshot(): what a session's terminal shows (protocol version 3, section 10), against the
real daemon. Every snapshot is taken once the daemon's log holds the output it must show
(a WAIT for text, or for the exit): the SCREEN covers every byte written before SNAPSHOT
arrived, so nothing here sleeps."""

import asyncio
import shutil
import subprocess

import pytest

import ptyvisor
from ptyvisor import errors

NO_SUCH_ID = "0" * 32

# The brief's example: clear the screen, "hello" at the top left, "world" at row 3 column 5.
HELLO_WORLD = r"printf '\033[2J\033[Hhello\033[3;5Hworld'"


@pytest.fixture
def running(client, session_env):
    """running(script, **start_kw) -> the id of a session running `bash -c script`, which
    then sleeps (so that it prints nothing more); every one is killed at the end."""
    ids = []

    def start(script, **kw):
        started = client.start(["bash", "-c", script + "; exec sleep 600"], env=session_env,
                               **kw)
        ids.append(started.id)
        return started.id

    yield start
    for session_id in ids:
        client.kill(session_id)


def wait_for(client, session_id, pattern):
    waited = client.wait(session_id, "text", pattern=pattern, timeout=10)
    assert waited.matched, f"the session did not print {pattern!r}"
    return waited


def test_text_is_where_the_program_put_it(client, running):
    session_id = running(HELLO_WORLD)
    waited = wait_for(client, session_id, "world")
    screen = client.snapshot(session_id)
    assert (screen.id, screen.rows, screen.cols) == (session_id, 24, 80)
    assert len(screen.lines) == 24
    assert screen.lines[0] == "hello"
    assert screen.lines[1] == ""
    assert screen.lines[2] == "    world"
    assert screen.lines[3:] == [""] * 21
    assert screen.cursor == (2, 9, True)             # right after "world"
    assert (screen.cursor.row, screen.cursor.col) == (2, 9)
    assert screen.text() == "hello\n\n    world" + "\n" * 21
    # Nothing was written after "world": the screen shows the whole log.
    assert screen.offset == waited.match_end == client.read(session_id).end
    assert not screen.alternate and screen.title == ""
    assert screen.scrollback == [] and screen.attributes is None


def test_the_size_is_the_sessions(client, running):
    session_id = running(HELLO_WORLD, rows=5, cols=12)
    wait_for(client, session_id, "world")
    screen = client.snapshot(session_id)
    assert (screen.rows, screen.cols) == (5, 12)
    assert screen.lines == ["hello", "", "    world", "", ""]


def test_the_text_is_what_tmux_capture_pane_prints(client, running, session_env, tmp_path):
    """Wide characters, a combining mark, a tab, a wrapped line and colours, in a tmux pane
    and in a session of the same size: capture-pane -p prints the rows of Screen.text(),
    each ending with a newline."""
    found = shutil.which("tmux")
    assert found, "tmux is needed to compare the screen with capture-pane"
    tmux: str = found   # narrowed for run_tmux below, which mypy checks as a closure
    script = (r"printf '\033[1;31mred\033[0m plain\r\n\346\227\245\346\234\254 e\314\201 "
              r"tab\there\r\n'; printf 'x%.0s' $(seq 1 100); printf '\r\n\033[5;3Hend'")
    sock = str(tmp_path / "tmux.sock")

    def run_tmux(*args):
        return subprocess.run([tmux, "-f", "/dev/null", "-S", sock, *args], check=True,
                              capture_output=True, text=True, env=session_env,
                              timeout=30).stdout

    run_tmux("new-session", "-d", "-x", "80", "-y", "24",
             f"{script}; tmux -S {sock} wait-for -S printed; exec sleep 600")
    try:
        run_tmux("wait-for", "printed")          # the pane's program has printed it all
        width, height = map(int, run_tmux("display", "-p",
                                          "#{pane_width} #{pane_height}").split())
        captured = run_tmux("capture-pane", "-p")
    finally:
        run_tmux("kill-server")
    session_id = running(script, rows=height, cols=width)
    wait_for(client, session_id, "end")
    screen = client.snapshot(session_id)
    # Each wide character takes two cells and appears once, the combining acute accent
    # follows its e, the tab goes on to column 16.
    assert screen.lines[1] == "\u65e5\u672c e\u0301 tab" + " " * 6 + "here"
    assert screen.text() + "\n" == captured


def test_the_title_is_set_by_osc_2_and_osc_0(client, running, session_env):
    session_id = running(r"printf '\033]2;first title\007'; read; "
                         r"printf '\033]0;second title\033\\'; printf done")
    wait_for(client, session_id, r"first title\x07")
    assert client.snapshot(session_id).title == "first title"
    client.send(session_id, "\n")
    wait_for(client, session_id, "done")
    assert client.snapshot(session_id).title == "second title"


def test_the_alternate_screen_and_back(client, running):
    session_id = running(r"printf 'main text'; printf '\033[?1049h\033[Hin the alternate'; "
                         r"read; printf '\033[?1049l'")
    wait_for(client, session_id, "in the alternate")
    shown = client.snapshot(session_id)
    assert shown.alternate
    assert shown.lines[0] == "in the alternate"
    assert "main text" not in shown.text()
    client.send(session_id, "\n")
    wait_for(client, session_id, r"\x1b\[\?1049l")
    back = client.snapshot(session_id)
    assert not back.alternate
    assert back.lines[0] == "main text"
    assert back.cursor == (0, 9, True)               # restored with the main screen


def test_a_hidden_cursor(client, running):
    session_id = running(r"printf 'x\033[?25l'")
    wait_for(client, session_id, r"\?25l")
    assert client.snapshot(session_id).cursor == (0, 1, False)


def test_attributes_come_only_when_asked(client, running):
    session_id = running(r"printf '\033[1;31mred\033[0m plain \033[4;44mblue\033[0m "
                         r"\033[38;5;202mo\033[38;2;16;32;48mt\033[0m \033[3;7;9mS\033[0m'")
    wait_for(client, session_id, r"S\x1b\[0m")
    assert client.snapshot(session_id).attributes is None
    screen = client.snapshot(session_id, attributes=True)
    assert screen.lines[0] == "red plain blue ot S"
    Run = ptyvisor.AttributeRun
    assert screen.attributes == [
        Run(row=0, col=0, width=3, bold=True, fg=1),          # bold red: palette entry 1
        Run(row=0, col=10, width=4, underline=1, bg=4),       # underlined, on blue
        Run(row=0, col=15, width=1, fg=202),                  # 256-colour palette
        Run(row=0, col=16, width=1, fg="#102030"),            # direct colour
        Run(row=0, col=18, width=1, italic=True, reverse=True, strike=True),
    ]


def test_scrollback_after_seq_in_a_24_row_terminal(client, running):
    session_id = running("seq 1 100")
    wait_for(client, session_id, r"\n100\r\n")
    screen = client.snapshot(session_id)
    # 100 lines and the empty one the cursor is on: 1..77 scrolled off the top.
    assert screen.lines == [str(n) for n in range(78, 101)] + [""]
    assert screen.cursor == (23, 0, True)
    assert screen.scrollback == []                   # not asked for
    assert client.snapshot(session_id, scrollback=10).scrollback == \
        [str(n) for n in range(68, 78)]              # the newest ten, oldest first
    everything = client.snapshot(session_id, scrollback=1000)
    assert everything.scrollback == [str(n) for n in range(1, 78)]
    assert everything.text(scrollback=True) == "\n".join(map(str, range(1, 101))) + "\n"


def test_a_session_that_has_exited_still_shows_its_screen(client, session_env):
    started = client.start(["bash", "-c", HELLO_WORLD], env=session_env)
    assert client.wait(started.id, timeout=10).reason == "exit"
    screen = client.snapshot(started.id)
    assert screen.lines[:3] == ["hello", "", "    world"]


@pytest.mark.skipif(shutil.which("vim") is None, reason="vim is not installed")
def test_vim_draws_on_the_alternate_screen(client, running, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("first line\nsecond line\n")
    session_id = running(f"exec vim -u NONE -N {path}")
    # vim shows the file once it has read it; the concatenated marker appears only when
    # :echo runs, after that first screen is drawn (the typed command shows it split).
    client.send(session_id, ":echo 'ready' . '-marker'\r")
    wait_for(client, session_id, "ready-marker")
    screen = client.snapshot(session_id)
    assert screen.alternate
    assert screen.lines[:3] == ["first line", "second line", "~"]
    assert screen.lines[-1].startswith("ready-marker")
    client.send(session_id, ":qa!\r")


def test_an_unknown_id_is_no_such_session(client):
    with pytest.raises(errors.NoSuchSession) as caught:
        client.snapshot(NO_SUCH_ID)
    assert caught.value.code == "no_such_session"


@pytest.mark.parametrize("kw", [{"scrollback": -1}, {"scrollback": 10001},
                                {"scrollback": True}, {"attributes": 1}])
def test_arguments_out_of_the_protocols_range_are_refused_here(client, kw):
    with pytest.raises(ValueError):
        client.snapshot(NO_SUCH_ID, **kw)


def test_an_id_that_is_not_32_lowercase_hex_digits_is_refused_here(client):
    with pytest.raises(ValueError):
        client.snapshot("ABC")


def test_an_attachment_and_spawn_take_their_sessions_snapshot(client, running, session_env):
    session_id = running(HELLO_WORLD)
    wait_for(client, session_id, "world")
    with client.attach(session_id, role="observer", offset="start") as observer:
        assert observer.snapshot().lines[2] == "    world"
    child = ptyvisor.spawn("bash", ["-c", HELLO_WORLD + "; read"], env=session_env,
                           dimensions=(10, 40))
    try:
        child.expect("world")
        screen = child.snapshot()
        assert (screen.id, screen.rows, screen.cols) == (child.id, 10, 40)
        assert screen.lines[:3] == ["hello", "", "    world"]
        assert screen.cursor == (2, 9, True)
    finally:
        child.close()


def test_the_asyncio_client(client, running):
    session_id = running(HELLO_WORLD + r"; printf '\033[1mB'")
    wait_for(client, session_id, "B")

    async def scenario():
        async_client = ptyvisor.AsyncClient()
        screen = await async_client.snapshot(session_id, scrollback=5, attributes=True)
        async with await async_client.attach(session_id, role="observer") as observer:
            from_attachment = await observer.snapshot()
        with pytest.raises(errors.NoSuchSession) as unknown:
            await async_client.snapshot(NO_SUCH_ID)
        return screen, from_attachment, unknown.value

    screen, from_attachment, unknown = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert screen.lines[:3] == ["hello", "", "    worldB"]
    assert screen.cursor == (2, 10, True)
    assert screen.attributes == [ptyvisor.AttributeRun(row=2, col=9, width=1, bold=True)]
    assert from_attachment.lines == screen.lines and from_attachment.attributes is None
    assert unknown.code == "no_such_session"
