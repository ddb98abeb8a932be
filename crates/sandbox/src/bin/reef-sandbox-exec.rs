//! The sandbox helper as its own program (reef offers the same as `reef sandbox-exec`): applies
//! the landlock backend to itself, then runs the command. Tests of reef-sandbox use it directly.

fn main() {
    std::process::exit(reef_sandbox::helper_main(
        std::env::args_os().skip(1).collect(),
    ));
}
