//! Compiles `proto/a2a.proto` (A2A's normative service and messages: the gRPC binding's,
//! and the STDIO binding's `stdio-proto` variant's) and `proto/stdio.proto` into a
//! descriptor set with protox, a protobuf compiler in Rust: no protoc needed; and from that
//! set, prost's Rust types of the messages (prost-build).
//! Finds the web UI that `cargo xtask build` wrote for this profile
//! (`{target}/{debug|release}/site`, or `PTYHOST_SITE_DIR`) so that `http::assets` embeds
//! it; without one the binary embeds an empty site and says so when it serves.

use prost::Message as _;

fn main() {
    println!("cargo:rerun-if-changed=proto");
    let set = protox::compile(["a2a.proto", "stdio.proto"], ["proto"]).expect("proto/ compiles");
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out.join("a2a.bin"), set.encode_to_vec()).expect("OUT_DIR is writable");
    prost_build::Config::new()
        .compile_fds(set)
        .expect("prost generates the messages");

    println!("cargo:rerun-if-env-changed=PTYHOST_SITE_DIR");
    let site = match std::env::var_os("PTYHOST_SITE_DIR") {
        Some(dir) => std::path::PathBuf::from(dir),
        // OUT_DIR is {target}/{profile}/build/server-{hash}/out.
        None => out
            .ancestors()
            .nth(3)
            .expect("OUT_DIR is in the target dir")
            .join("site"),
    };
    std::fs::create_dir_all(&site).expect("the site directory can be created");
    println!("cargo:rerun-if-changed={}", site.display());
    println!("cargo:rustc-env=PTYHOST_SITE_DIR={}", site.display());
}
