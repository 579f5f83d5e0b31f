//! `cargo xtask build [--release]` builds the web UI and the ptyhost binary that embeds it.
//!
//! 1. `frontend` (the hydrate entry) for wasm32, with the `wasm-release` profile in release;
//! 2. wasm-bindgen (`--target web`), as a library;
//! 3. in release, binaryen's `wasm-opt -Oz` (the npm build of binaryen, `frontend/package.json`);
//! 4. `style/main.css` minified by lightningcss for the `defaults` browsers;
//! 5. the site: `pkg/ptyhost.{HASH}.js`, `pkg/ptyhost.{HASH}_bg.wasm`, `pkg/ptyhost.{HASH}.css`
//!    (one content hash for the three, so a page never mixes builds), `public/`, and the
//!    xterm.js ESM files from npm under `vendor/`; every text or WASM file also as `.br`
//!    and `.gz`;
//! 6. `cargo build -p server --bin ptyhost`, whose build script embeds that site.
//!
//! The site lives in `{target}/{debug|release}/site`, where the server's build script
//! looks for it. `public/vendor/` is refreshed too, so `cargo leptos watch` still works for
//! UI work.

#![forbid(unsafe_code)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail, ensure};
use sha2::{Digest as _, Sha256};

/// The xterm.js ESM builds the page's import map names, from `frontend/node_modules`.
const VENDOR: &[(&str, &str)] = &[
    ("@xterm/xterm/lib/xterm.mjs", "xterm.mjs"),
    ("@xterm/xterm/css/xterm.css", "xterm.css"),
    ("@xterm/addon-fit/lib/addon-fit.mjs", "addon-fit.mjs"),
    (
        "@xterm/addon-unicode11/lib/addon-unicode11.mjs",
        "addon-unicode11.mjs",
    ),
    ("@xterm/addon-webgl/lib/addon-webgl.mjs", "addon-webgl.mjs"),
    (
        "@xterm/addon-search/lib/addon-search.mjs",
        "addon-search.mjs",
    ),
];

/// What the browser gets compressed: everything but images that are already small.
const COMPRESSED: &[&str] = &["js", "mjs", "wasm", "css", "svg", "html", "json"];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let release = args.iter().any(|a| a == "--release");
    match args.first().map(String::as_str) {
        Some("build") => build(release),
        _ => bail!("usage: cargo xtask build [--release]"),
    }
}

struct Paths {
    root: PathBuf,
    target: PathBuf,
}

impl Paths {
    fn find() -> Result<Self> {
        // `cargo run` names the manifest of the checkout it runs in; the path compiled in
        // may be another checkout's that built this binary into the shared target dir.
        let manifest = std::env::var_os("CARGO_MANIFEST_DIR")
            .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
        let root = manifest
            .ancestors()
            .nth(2)
            .context("xtask lives two levels below the workspace")?
            .to_path_buf();
        // This program runs from {target}/debug/xtask.
        let exe = std::env::current_exe()?;
        let target = exe
            .ancestors()
            .nth(2)
            .context("xtask runs from the target directory")?
            .to_path_buf();
        Ok(Self { root, target })
    }
}

fn build(release: bool) -> Result<()> {
    let paths = Paths::find()?;
    npm_tools(&paths.root)?;
    let profile_dir = if release { "release" } else { "debug" };
    let site = paths.target.join(profile_dir).join("site");
    let started = std::time::Instant::now();

    let wasm = build_wasm(&paths, release)?;
    vendor(&paths.root)?;
    let stamp = paths.target.join(profile_dir).join("site.stamp");
    let inputs = fingerprint(&paths.root, &wasm)?;
    if site.join("pkg").is_dir() && std::fs::read(&stamp).ok().as_deref() == Some(&inputs[..]) {
        println!("site: {} (up to date)", site.display());
    } else {
        let staging = paths.target.join("xtask-bindgen").join(profile_dir);
        build_site(&paths, release, &wasm, &staging, &site)?;
        std::fs::write(&stamp, inputs)?;
        println!(
            "site: {} (built in {:.1} s)",
            site.display(),
            started.elapsed().as_secs_f64()
        );
    }

    let mut server = cargo();
    server.args(["build", "-p", "server", "--bin", "ptyhost"]);
    if release {
        server.arg("--release");
    }
    run(&mut server)?;
    println!(
        "binary: {}",
        paths.target.join(profile_dir).join("ptyhost").display()
    );
    Ok(())
}

/// A digest of everything the site is made from: the WASM cargo built, the CSS, `public/`
/// (vendored xterm.js included), the npm lock and this program itself.
fn fingerprint(root: &Path, wasm: &Path) -> Result<Vec<u8>> {
    let mut files = vec![
        wasm.to_path_buf(),
        root.join("style/main.css"),
        root.join("frontend/package-lock.json"),
        std::env::current_exe()?,
    ];
    list_files(&root.join("public"), &mut files)?;
    let mut h = Sha256::new();
    for file in files {
        h.update(file.to_string_lossy().as_bytes());
        h.update(std::fs::read(&file).with_context(|| file.display().to_string())?);
    }
    Ok(h.finalize().to_vec())
}

fn list_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if entry.file_type()?.is_dir() {
            list_files(&entry.path(), out)?;
        } else {
            out.push(entry.path());
        }
    }
    Ok(())
}

/// The site from the WASM cargo built: bindgen output in `staging`, the hashed bundle,
/// `public/` and the compressed copies in `site`.
fn build_site(
    paths: &Paths,
    release: bool,
    wasm: &Path,
    staging: &Path,
    site: &Path,
) -> Result<()> {
    let _ = std::fs::remove_dir_all(staging);
    wasm_bindgen_cli_support::Bindgen::new()
        .input_path(wasm)
        .out_name("ptyhost")
        .web(true)?
        .typescript(false)
        .debug(!release)
        .generate(staging)
        .context("wasm-bindgen")?;
    let bg = staging.join("ptyhost_bg.wasm");
    if release {
        wasm_opt(&paths.root, &bg)?;
    }
    let css = minify_css(&paths.root)?;

    let js = std::fs::read(staging.join("ptyhost.js"))?;
    let wasm_bytes = std::fs::read(&bg)?;
    let hash = {
        let mut h = Sha256::new();
        for part in [&js, &wasm_bytes, &css] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part);
        }
        let digest = h.finalize();
        digest[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };

    let _ = std::fs::remove_dir_all(site);
    let pkg = site.join("pkg");
    std::fs::create_dir_all(&pkg)?;
    std::fs::write(pkg.join(format!("ptyhost.{hash}.js")), &js)?;
    std::fs::write(pkg.join(format!("ptyhost.{hash}_bg.wasm")), &wasm_bytes)?;
    std::fs::write(pkg.join(format!("ptyhost.{hash}.css")), &css)?;
    if staging.join("snippets").is_dir() {
        copy_tree(&staging.join("snippets"), &pkg.join("snippets"))?;
    }
    copy_tree(&paths.root.join("public"), site)?;
    compress_tree(site, release)?;
    println!("wasm: {} KiB", wasm_bytes.len() / 1024);
    Ok(())
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("running {cmd:?}"))?;
    ensure!(status.success(), "{cmd:?} failed: {status}");
    Ok(())
}

/// `npm ci` in `frontend/` when its lock file is newer than what is installed.
fn npm_tools(root: &Path) -> Result<()> {
    let dir = root.join("frontend");
    let lock = std::fs::read(dir.join("package-lock.json"))?;
    let installed = dir.join("node_modules").join(".package-lock.json");
    let stamp = dir.join("node_modules").join(".xtask-lock");
    if installed.exists() && std::fs::read(&stamp).ok().as_deref() == Some(&lock[..]) {
        return Ok(());
    }
    // lightningcss-cli's install script copies its platform package's binary into place.
    run(Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&dir))?;
    std::fs::write(stamp, lock)?;
    Ok(())
}

fn build_wasm(paths: &Paths, release: bool) -> Result<PathBuf> {
    let mut cmd = cargo();
    cmd.args([
        "build",
        "-p",
        "frontend",
        "--lib",
        "--target",
        "wasm32-unknown-unknown",
    ]);
    if release {
        cmd.args(["--profile", "wasm-release"]);
    }
    run(&mut cmd)?;
    let dir = if release { "wasm-release" } else { "debug" };
    Ok(paths
        .target
        .join("wasm32-unknown-unknown")
        .join(dir)
        .join("frontend.wasm"))
}

fn wasm_opt(root: &Path, wasm: &Path) -> Result<()> {
    let out = wasm.with_extension("opt.wasm");
    run(
        Command::new(root.join("frontend/node_modules/.bin/wasm-opt"))
            .arg("-Oz")
            // The features rustc's wasm32 target enables by default.
            .args([
                "--enable-bulk-memory",
                "--enable-nontrapping-float-to-int",
                "--enable-sign-ext",
                "--enable-mutable-globals",
                "--enable-reference-types",
                "--enable-multivalue",
            ])
            .arg(wasm)
            .arg("-o")
            .arg(&out),
    )?;
    std::fs::rename(out, wasm)?;
    Ok(())
}

fn minify_css(root: &Path) -> Result<Vec<u8>> {
    let out = Command::new(root.join("frontend/node_modules/.bin/lightningcss"))
        .args(["--minify", "--targets", "defaults"])
        .arg(root.join("style/main.css"))
        .output()
        .context("running lightningcss")?;
    ensure!(
        out.status.success(),
        "lightningcss: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(out.stdout)
}

/// Refreshes `public/vendor/` from npm (without the source-map references: the maps are
/// not shipped).
fn vendor(root: &Path) -> Result<()> {
    let dest = root.join("public/vendor");
    std::fs::create_dir_all(&dest)?;
    for (from, to) in VENDOR {
        let src = root.join("frontend/node_modules").join(from);
        let text = std::fs::read_to_string(&src).with_context(|| src.display().to_string())?;
        let kept: String = text
            .lines()
            .filter(|l| !l.starts_with("//# sourceMappingURL="))
            .flat_map(|l| [l, "\n"])
            .collect();
        let path = dest.join(to);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(kept.as_str()) {
            std::fs::write(path, kept)?;
        }
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &dest)?;
        } else {
            std::fs::copy(entry.path(), dest)?;
        }
    }
    Ok(())
}

/// Writes `F.br` and `F.gz` beside every compressible file F, when they are smaller: at the
/// best ratio in release, quickly for the much larger debug WASM.
fn compress_tree(dir: &Path, release: bool) -> Result<()> {
    let (gz_level, br_quality) = if release { (9, 11) } else { (1, 3) };
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            compress_tree(&path, release)?;
            continue;
        }
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !COMPRESSED.contains(&ext) {
            continue;
        }
        let raw = std::fs::read(&path)?;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(gz_level));
        gz.write_all(&raw)?;
        let gz = gz.finish()?;
        let mut br = Vec::new();
        brotli::BrotliCompress(
            &mut &raw[..],
            &mut br,
            &brotli::enc::BrotliEncoderParams {
                quality: br_quality,
                ..Default::default()
            },
        )?;
        for (suffix, bytes) in [("gz", gz), ("br", br)] {
            if bytes.len() < raw.len() {
                let mut name = path.clone().into_os_string();
                name.push(".");
                name.push(suffix);
                std::fs::write(name, bytes)?;
            }
        }
    }
    Ok(())
}
