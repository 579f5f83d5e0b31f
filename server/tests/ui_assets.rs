//! The web UI's files: embedded in the binary by `cargo xtask build` (which the test command
//! runs first), precompressed, with ETags, and cached for good only under hashed names; or
//! read from `--site-root` instead.

mod common;

use common::TestServer;

fn at(s: &TestServer, path: &str) -> String {
    format!("http://{}{path}", s.addr)
}

/// The `pkg/ptyhost.{hash}` name the page loads its bundle under.
/// The HTML of the root page.
async fn page(s: &TestServer) -> String {
    let resp = s.http.get(at(s, "/")).send().await.unwrap();
    resp.text().await.unwrap()
}

async fn bundle(s: &TestServer) -> String {
    let html = page(s).await;
    let preload = r#"rel="modulepreload" href="/pkg/"#;
    let start = html.find(preload).expect("the page preloads its bundle") + preload.len();
    let name = &html[start..];
    let name = &name[..name.find(".js\"").expect("a .js bundle")];
    assert!(
        name.len() == "ptyhost.".len() + 16,
        "the bundle has a content hash in its name ({name}); the test command builds the UI \
         with `cargo xtask build` before these tests"
    );
    name.to_owned()
}

#[tokio::test]
async fn the_page_loads_a_hashed_bundle_served_compressed_and_cached_for_a_year() {
    let s = TestServer::start(&[]).await;
    let name = bundle(&s).await;
    for (file, kind) in [
        (format!("{name}.js"), "text/javascript"),
        (format!("{name}_bg.wasm"), "application/wasm"),
        (format!("{name}.css"), "text/css"),
    ] {
        let url = at(&s, &format!("/pkg/{file}"));
        let plain = s.http.get(&url).send().await.unwrap();
        assert_eq!(plain.status(), 200, "{file}");
        assert_eq!(plain.headers()["content-type"], kind, "{file}");
        assert_eq!(
            plain.headers()["cache-control"],
            "public, max-age=31536000, immutable"
        );
        assert!(plain.headers().get("content-encoding").is_none());
        let raw = plain.bytes().await.unwrap();
        for (accept, coding) in [("gzip, deflate, br", "br"), ("gzip", "gzip")] {
            let packed = s
                .http
                .get(&url)
                .header("accept-encoding", accept)
                .send()
                .await
                .unwrap();
            assert_eq!(
                packed.headers()["content-encoding"],
                coding,
                "{file} {accept}"
            );
            assert_eq!(packed.headers()["vary"], "accept-encoding");
            let body = packed.bytes().await.unwrap();
            assert!(body.len() < raw.len(), "{file} is smaller as {coding}");
        }
    }
}

#[tokio::test]
async fn an_unchanged_file_answers_304_to_its_etag_and_unhashed_files_are_revalidated() {
    let s = TestServer::start(&[]).await;
    let first = s
        .http
        .get(at(&s, "/vendor/xterm.mjs"))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["cache-control"], "no-cache");
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    let again = s
        .http
        .get(at(&s, "/vendor/xterm.mjs"))
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    assert!(again.bytes().await.unwrap().is_empty());
    let other = s
        .http
        .get(at(&s, "/vendor/xterm.mjs"))
        .header("if-none-match", "\"something-else\"")
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
    let head = s.http.head(at(&s, "/favicon.svg")).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["content-type"], "image/svg+xml");
}

#[tokio::test]
async fn site_root_serves_the_ui_from_that_directory_instead() {
    let site = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(site.path().join("pkg")).unwrap();
    std::fs::write(
        site.path().join("pkg/ptyhost.js"),
        "// from the directory\n",
    )
    .unwrap();
    let root = site.path().to_str().unwrap();
    let s = TestServer::start(&["--site-root", root]).await;
    let html = page(&s).await;
    assert!(
        html.contains("/pkg/ptyhost.js") && html.contains("/pkg/ptyhost.css"),
        "an unhashed (cargo-leptos) site is loaded by its plain names"
    );
    let js = s.http.get(at(&s, "/pkg/ptyhost.js")).send().await.unwrap();
    assert_eq!(js.status(), 200);
    assert_eq!(js.text().await.unwrap(), "// from the directory\n");
    let missing = s
        .http
        .get(at(&s, "/vendor/xterm.mjs"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 200, "not a file: the app's own page");
    assert!(missing.text().await.unwrap().contains("Not found."));
}
