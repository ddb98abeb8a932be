//! `/init` of a reef microVM: see [`reef_vm_agent::guest`].

fn main() {
    std::process::exit(reef_vm_agent::guest::main());
}
