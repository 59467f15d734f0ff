//! `docs/FLAGS.md` is generated from the clap definitions of both binaries (the transceiver's
//! `Config`, the relay's `Args`): one section per binary, one table per help heading, each
//! flag with its environment twin, its default and the first paragraph of its doc comment.
//! This test renders it and fails when the file differs; with `VOXGATE_BLESS=1` it writes
//! the file instead:
//!
//! ```text
//! VOXGATE_BLESS=1 cargo test -p voxgate-transceiver --test flags_doc
//! ```

use std::fmt::Write as _;
use std::path::Path;

use clap::{ArgAction, CommandFactory};

const BLESS: &str = "VOXGATE_BLESS=1 cargo test -p voxgate-transceiver --test flags_doc";

#[test]
fn flags_doc_is_generated_from_the_clap_definitions() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/FLAGS.md");
    let rendered = render();
    if std::env::var_os("VOXGATE_BLESS").is_some_and(|v| v != "0") {
        std::fs::write(&path, &rendered).expect("writing docs/FLAGS.md");
        return;
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    if on_disk != rendered {
        let first_difference = on_disk
            .lines()
            .zip(rendered.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| on_disk.lines().count().min(rendered.lines().count()));
        panic!(
            "docs/FLAGS.md is stale (first difference at line {}): the flags' clap definitions \
             changed. Regenerate it with `{BLESS}` and commit it.",
            first_difference + 1
        );
    }
}

/// The whole of `docs/FLAGS.md`.
fn render() -> String {
    let mut out = String::from(
        "# Command-line flags\n\n\
         Every flag of the transceiver and the relay, by help heading, with its environment \
         variable and default. `--help` prints the same, with the longer explanations.\n\n",
    );
    let _ = writeln!(
        out,
        "Generated from the clap definitions (`transceiver/src/control/config/`, \
         `relay/src/config/flags.rs`) by `transceiver/tests/flags_doc.rs`, which fails when \
         this file is stale: do not edit it by hand, change the flag's doc comment and run \
         `{BLESS}`.\n"
    );
    render_binary(
        &mut out,
        voxgate_transceiver::control::config::Config::command(),
    );
    render_binary(&mut out, voxgate_relay::config::Args::command());
    out
}

/// One binary's section: its name and about line, then a table per help heading, in the order
/// the headings first appear.
fn render_binary(out: &mut String, mut command: clap::Command) {
    command.build();
    let _ = writeln!(out, "## {}\n", command.get_name());
    if let Some(about) = command.get_about() {
        let _ = writeln!(out, "{}\n", sentence(&about.to_string()));
    }
    let flags: Vec<&clap::Arg> = command
        .get_arguments()
        .filter(|a| {
            !matches!(
                a.get_action(),
                ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
            )
        })
        .collect();
    let mut headings: Vec<&str> = Vec::new();
    for flag in &flags {
        let heading = flag.get_help_heading().unwrap_or("Options");
        if !headings.contains(&heading) {
            headings.push(heading);
        }
    }
    for heading in headings {
        let _ = writeln!(out, "### {heading}\n");
        out.push_str("| Flag | Environment | Default | What it does |\n");
        out.push_str("| --- | --- | --- | --- |\n");
        for flag in flags
            .iter()
            .filter(|f| f.get_help_heading().unwrap_or("Options") == heading)
        {
            render_flag(out, flag);
        }
        out.push('\n');
    }
}

fn render_flag(out: &mut String, flag: &clap::Arg) {
    let long = flag.get_long().expect("every flag has a long name");
    let takes_value = flag.get_action().takes_values();
    let name = match flag.get_value_names() {
        Some([value, ..]) if takes_value => format!("`--{long} <{value}>`"),
        _ => format!("`--{long}`"),
    };
    let env = flag
        .get_env()
        .map(|e| format!("`{}`", e.to_string_lossy()))
        .unwrap_or_default();
    let defaults: Vec<String> = flag
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    let default = if takes_value && !defaults.is_empty() {
        format!("`{}`", defaults.join(","))
    } else {
        String::new()
    };
    let mut what = flag
        .get_help()
        .map(|h| sentence(&h.to_string()))
        .unwrap_or_default();
    let choices: Vec<String> = flag
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if takes_value && !choices.is_empty() {
        let _ = write!(what, " One of {}.", choices.join(", "));
    }
    let _ = writeln!(out, "| {name} | {env} | {default} | {} |", cell(&what));
}

/// clap drops the final period of a one-paragraph help; a table of sentences wants it back.
fn sentence(text: &str) -> String {
    let text = text.trim();
    if text.ends_with(['.', '!', '?']) {
        text.to_owned()
    } else {
        format!("{text}.")
    }
}

/// Text fit for one table cell: on one line, with `|` escaped.
fn cell(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}
