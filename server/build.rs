//! Compiles `proto/a2a.proto` (the messages of the STDIO binding's `stdio-proto` variant)
//! into a descriptor set with protox, a protobuf compiler in Rust: no protoc needed.

use prost::Message as _;

fn main() {
    println!("cargo:rerun-if-changed=proto/a2a.proto");
    let set = protox::compile(["a2a.proto"], ["proto"]).expect("proto/a2a.proto compiles");
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("a2a.bin"), set.encode_to_vec()).expect("OUT_DIR is writable");
}
