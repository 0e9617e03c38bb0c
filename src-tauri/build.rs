//! Builds the Tauri context from `tauri.conf.json` beside this crate (see ARCHITECTURE.md for why
//! it lives here and not at the repository root).

fn main() {
    tauri_build::build();
}
