//! Tidy: the core stays pure. It may not name IO, processes, the network, the clock or the
//! environment, and depends on nothing that does.

use std::fs;
use std::path::Path;

const BANNED: &[&str] = &[
    "std::fs",
    "std::io",
    "std::net",
    "std::process",
    "std::env",
    "std::thread",
    "SystemTime",
    "Instant",
    "tokio",
    "rusqlite",
    "unsafe",
];

const ALLOWED_DEPENDENCIES: &[&str] = &["serde", "thiserror"];

#[test]
fn core_source_names_no_io() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut offences = Vec::new();
    for entry in fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let text = fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            for banned in BANNED {
                if line.contains(banned) {
                    offences.push(format!("{}:{}: {banned}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(
        offences.is_empty(),
        "the core must stay pure:\n{}",
        offences.join("\n")
    );
}

#[test]
fn core_depends_on_nothing_that_does_io() {
    let manifest =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .unwrap()
        .split("\n[")
        .next()
        .unwrap();
    for line in deps.lines().filter(|l| !l.trim().is_empty()) {
        let name = line.split(['=', '.']).next().unwrap().trim();
        assert!(
            ALLOWED_DEPENDENCIES.contains(&name),
            "core may not depend on {name}"
        );
    }
}
