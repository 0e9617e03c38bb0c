//! A desktop for the launcher's tests: a private Xvfb display, a private session bus, the real
//! launcher started on them (directly, or by WebKitWebDriver through tauri-driver), and a small
//! W3C WebDriver client. Every process here is this test's own child, stopped on drop.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine;
use reconcile_e2e::{DEADLINE, Env, bin, exits_within, free_port};
use reconcile_testkit::wait_for;
use serde_json::{Value, json};

/// One webview at a time: two cores do not run two WebKit instances and the daemon well.
pub static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// SIGTERM our own child, then SIGKILL if it is still there after `grace`; reap it.
fn stop_child(child: &mut Child, grace: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    if !exits_within(child.id(), grace) {
        let _ = child.kill();
    }
    let _ = child.wait();
}

/// A private X display.
pub struct Display {
    pub name: String,
    child: Child,
}

impl Display {
    pub fn start() -> Display {
        for n in 140..400 {
            if Path::new(&format!("/tmp/.X11-unix/X{n}")).exists()
                || Path::new(&format!("/tmp/.X{n}-lock")).exists()
            {
                continue;
            }
            let mut child = Command::new("Xvfb")
                .args([
                    &format!(":{n}"),
                    "-screen",
                    "0",
                    "1280x800x24",
                    "-nolisten",
                    "tcp",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("Xvfb (scripts/setup installs it)");
            let socket = PathBuf::from(format!("/tmp/.X11-unix/X{n}"));
            let mut exited = false;
            wait_for("Xvfb to listen", DEADLINE, || {
                exited = matches!(child.try_wait(), Ok(Some(_)));
                exited || socket.exists()
            });
            if !exited {
                return Display {
                    name: format!(":{n}"),
                    child,
                };
            }
        }
        panic!("no free X display number");
    }
}

impl Drop for Display {
    fn drop(&mut self) {
        stop_child(&mut self.child, Duration::from_secs(5));
    }
}

/// A private D-Bus session bus.
pub struct Bus {
    pub address: String,
    child: Child,
}

impl Bus {
    pub fn start() -> Bus {
        let mut child = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--print-address=1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon (scripts/setup installs it)");
        let mut address = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut address)
            .unwrap();
        Bus {
            address: address.trim().to_owned(),
            child,
        }
    }

    /// Call `method` of `dest` at `path` with `args` (GVariant text); its reply, or the error.
    pub fn call(
        &self,
        dest: &str,
        path: &str,
        method: &str,
        args: &[&str],
    ) -> Result<String, String> {
        let mut all = vec![
            "call",
            "--session",
            "--dest",
            dest,
            "--object-path",
            path,
            "--method",
            method,
            "--",
        ];
        all.extend_from_slice(args);
        self.try_gdbus(&all)
    }

    /// `gdbus` on this bus; stdout, or what it printed on stderr.
    pub fn try_gdbus(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new("gdbus")
            .args(args)
            .env("DBUS_SESSION_BUS_ADDRESS", &self.address)
            .output()
            .unwrap();
        if out.status.success() {
            Ok(String::from_utf8(out.stdout).unwrap())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        stop_child(&mut self.child, Duration::from_secs(5));
    }
}

/// The environment a launcher runs in: the state directory, port and tmux socket of `env`, the
/// display and the bus.
pub fn launcher_command(env: &Env, program: &Path, display: &Display, bus: &Bus) -> Command {
    let mut c = env.command(program);
    c.env("DISPLAY", &display.name)
        .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
        .env_remove("WAYLAND_DISPLAY")
        .env("RECONCILE_DAEMON", bin("reconciled"))
        // Xvfb has no GPU.
        .env("WEBKIT_DISABLE_COMPOSITING_MODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

/// The launcher started directly.
pub struct App {
    pub child: Child,
}

impl App {
    pub fn start(env: &Env, display: &Display, bus: &Bus) -> App {
        App {
            child: launcher_command(env, &bin("reconcile-launcher"), display, bus)
                .spawn()
                .unwrap(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for App {
    fn drop(&mut self) {
        stop_child(&mut self.child, Duration::from_secs(5));
    }
}

fn tauri_driver() -> PathBuf {
    if let Ok(found) = Command::new("sh")
        .args(["-c", "command -v tauri-driver"])
        .output()
        && found.status.success()
    {
        return PathBuf::from(String::from_utf8_lossy(&found.stdout).trim());
    }
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
    let path = cargo_home.join("bin/tauri-driver");
    assert!(
        path.exists(),
        "tauri-driver is missing: scripts/setup installs it"
    );
    path
}

/// tauri-driver, and one WebDriver session that started the launcher in a real webview.
pub struct Driver {
    child: Child,
    http: reqwest::blocking::Client,
    base: String,
    session: Option<String>,
}

/// The W3C WebDriver key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

impl Driver {
    pub fn start(env: &Env, display: &Display, bus: &Bus) -> Driver {
        let port = free_port();
        let native = free_port();
        let child = launcher_command(env, &tauri_driver(), display, bus)
            .args([
                "--port",
                &port.to_string(),
                "--native-port",
                &native.to_string(),
                "--native-driver",
                "/usr/bin/WebKitWebDriver",
            ])
            .spawn()
            .unwrap();
        let http = reqwest::blocking::Client::builder()
            .timeout(DEADLINE)
            .build()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let mut driver = Driver {
            child,
            http,
            base,
            session: None,
        };
        wait_for("tauri-driver to listen", DEADLINE, || {
            driver
                .http
                .get(format!("{}/status", driver.base))
                .send()
                .is_ok()
        });
        let application = bin("reconcile-launcher");
        let created = driver.call(
            "POST",
            "/session",
            json!({"capabilities": {"alwaysMatch": {
                "browserName": "wry",
                "tauri:options": {"application": application}
            }}}),
        );
        driver.session = Some(
            created["sessionId"]
                .as_str()
                .unwrap_or_else(|| panic!("no WebDriver session: {created}"))
                .to_owned(),
        );
        driver
    }

    fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body),
        };
        let response: Value = request.send().unwrap().json().unwrap();
        response["value"].clone()
    }

    fn session_call(&self, method: &str, path: &str, body: Value) -> Value {
        let session = self.session.as_ref().unwrap();
        self.call(method, &format!("/session/{session}{path}"), body)
    }

    /// Run `script` in the page; its return value.
    pub fn script(&self, script: &str) -> Value {
        self.session_call(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
    }

    /// Wait until `script` returns true in the page.
    pub fn wait_until(&self, what: &str, script: &str) {
        wait_for(what, DEADLINE, || self.script(script) == Value::Bool(true));
    }

    /// Click the element `css` selects, through WebDriver (a real click in the webview).
    pub fn click(&self, css: &str) {
        let found = self.session_call(
            "POST",
            "/element",
            json!({"using": "css selector", "value": css}),
        );
        let id = found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {found}"));
        self.session_call("POST", &format!("/element/{id}/click"), json!({}));
    }

    pub fn resize(&self, width: u32, height: u32) {
        self.session_call(
            "POST",
            "/window/rect",
            json!({"width": width, "height": height}),
        );
    }

    /// Save a screenshot of the window under `target/ui-screenshots/<name>.png`.
    pub fn screenshot(&self, name: &str) -> PathBuf {
        let png = self.session_call("GET", "/screenshot", Value::Null);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().expect("a screenshot"))
            .unwrap();
        // target/<profile>/reconcile-launcher → target/ui-screenshots
        let dir = bin("reconcile-launcher")
            .parent()
            .and_then(Path::parent)
            .unwrap()
            .join("ui-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, bytes).unwrap();
        path
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if self.session.is_some() {
            // Closes the window; the launcher exits.
            let _ = self.session_call("DELETE", "", Value::Null);
        }
        stop_child(&mut self.child, Duration::from_secs(5));
    }
}
