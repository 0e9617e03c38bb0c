//! The desktop launcher, for real: the app in a real webview (WebKitGTK under Xvfb, driven by
//! tauri-driver and WebKitWebDriver), its tray over D-Bus, and `--takeover` without a display.
//! Screenshots of each step of the webview test are written under `target/ui-screenshots/`.

mod desktop;
mod headless;
mod tray;
mod webview;
