//! Builds the Tauri context from the repository's root `tauri.conf.json`.

fn main() {
    tauri_build::try_build(tauri_build::Attributes::new().config_path("../tauri.conf.json"))
        .expect("the Tauri build script failed");
}
