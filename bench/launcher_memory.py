"""Idle memory of the desktop launcher and its webview processes (RSS and PSS from
/proc/<pid>/smaps_rollup), against the daemon it started, measured in the same run.

Starts a private Xvfb display and session bus, the release launcher with its own state
directory, waits for the daemon to be ready, lets everything idle for 20 s, reads memory, and
stops only the processes it started (the launcher's descendants are found through /proc).
Usage: python3 bench/launcher_memory.py TARGET_DIR
"""
import json, os, signal, socket, subprocess, sys, tempfile, time, urllib.request

target = sys.argv[1] if len(sys.argv) > 1 else "target"
launcher = os.path.abspath(os.path.join(target, "release", "reconcile-launcher"))
daemon_bin = os.path.abspath(os.path.join(target, "release", "reconciled"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def rollup(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if parts[0] in ("Rss:", "Pss:"):
                out[parts[0][:-1]] = int(parts[1])
    return out


def children(pid):
    kids = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids += [int(p) for p in f.read().split()]
        except FileNotFoundError:
            pass
    return kids


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children(p):
            out.append(c)
            todo.append(c)
    return out


def name(pid):
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def wait(what, check, deadline=60):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if check():
            return
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


work = tempfile.mkdtemp(prefix="reconcile-memory-")
display = next(n for n in range(420, 600) if not os.path.exists(f"/tmp/.X11-unix/X{n}"))
xvfb = subprocess.Popen(["Xvfb", f":{display}", "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
address = bus.stdout.readline().strip()
port = free_port()
env = dict(os.environ, DISPLAY=f":{display}", DBUS_SESSION_BUS_ADDRESS=address,
           RECONCILE_HOME=os.path.join(work, "home"), RECONCILE_PORT=str(port),
           RECONCILE_TMUX_SOCKET=f"memory-{os.getpid()}", RECONCILE_DAEMON=daemon_bin,
           WEBKIT_DISABLE_COMPOSITING_MODE="1")
env.pop("WAYLAND_DISPLAY", None)
app = None
try:
    wait("the display", lambda: os.path.exists(f"/tmp/.X11-unix/X{display}"))
    app = subprocess.Popen([launcher], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_file = os.path.join(work, "home", "daemon.json")

    def ready():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                return r.status == 200
        except Exception:
            return False

    wait("the daemon", ready)
    wait("the webview", lambda: any(name(p).startswith("WebKitWeb") for p in descendants(app.pid)))
    time.sleep(20)  # the measured idle window
    with open(run_file) as f:
        daemon_pid = json.load(f)["pid"]
    # The daemon is the launcher's child (started in its own session): the baseline, not a part.
    procs = [(app.pid, "reconcile-launcher")] + [
        (p, name(p)) for p in descendants(app.pid) if p != daemon_pid
    ]
    rows = [(n, rollup(p)) for p, n in procs]
    base = rollup(daemon_pid)
    total = {k: sum(r[k] for _, r in rows) for k in ("Rss", "Pss")}
    mib = lambda kb: kb / 1024
    print("launcher idle for 20 s with the daemon ready (release build, Xvfb, no sessions)")
    print("| process | RSS | PSS | PSS ratio to the daemon |")
    print("|---|---:|---:|---:|")
    print(f"| baseline: reconciled (the daemon) | {mib(base['Rss']):.1f} MiB | {mib(base['Pss']):.1f} MiB | 1.0x |")
    for n, r in rows:
        print(f"| {n} | {mib(r['Rss']):.1f} MiB | {mib(r['Pss']):.1f} MiB | {r['Pss'] / base['Pss']:.1f}x |")
    print(f"| launcher and its webview, together | {mib(total['Rss']):.1f} MiB | {mib(total['Pss']):.1f} MiB | {total['Pss'] / base['Pss']:.1f}x |")
finally:
    if app is not None:
        kids = descendants(app.pid)
        app.terminate()
        try:
            app.wait(10)
        except subprocess.TimeoutExpired:
            app.kill()
        for k in kids:
            try:
                os.kill(k, signal.SIGTERM)
            except ProcessLookupError:
                pass
    subprocess.run([os.path.join(os.path.dirname(launcher), "reconcile"), "daemon", "stop"], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bus.terminate()
    xvfb.terminate()
