use super::*;

fn body(chunks: &[&'static [u8]]) -> impl Stream<Item = Result<Bytes, io::Error>> {
    futures_util::stream::iter(
        chunks
            .iter()
            .map(|c| Ok(Bytes::from_static(c)))
            .collect::<Vec<_>>(),
    )
}

fn rel(p: &str) -> RelPath {
    RelPath::parse(p).unwrap()
}

async fn read_all(root: &Root, p: &str) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let Found::File(mut d) = read(root, &rel(p)).await.unwrap() else {
        panic!("{p} is a directory");
    };
    let mut out = Vec::new();
    d.file.read_to_end(&mut out).await.unwrap();
    out
}

#[test]
fn paths_that_leave_the_working_directory_are_refused_before_any_lookup() {
    for bad in ["../x", "a/../../x", "/etc/passwd", "a/..", "x\0y"] {
        let e = RelPath::parse(bad).unwrap_err();
        assert_eq!((e.status, e.reason), (400, "INVALID_PATH"), "{bad}");
    }
    assert_eq!(rel("./a//b/./c").as_path(), Path::new("a/b/c"));
    assert_eq!(rel("").as_path(), Path::new(""));
}

#[tokio::test]
async fn a_written_file_reads_back_and_lists_with_its_parents_created() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Root::open(tmp.path()).unwrap();
    let n = write(
        &root,
        &rel("out/deep/report.txt"),
        body(&[b"hello ", b"world"]),
        100,
    )
    .await
    .unwrap();
    assert_eq!((n.bytes, n.replaced), (11, false));
    assert_eq!(read_all(&root, "out/deep/report.txt").await, b"hello world");
    let Found::Dir(list) = read(&root, &rel("out/deep")).await.unwrap() else {
        panic!("a directory lists");
    };
    assert_eq!(list.entries.len(), 1, "no temporary file is left beside it");
    assert_eq!(list.entries[0].name, "report.txt");
    assert_eq!(
        (list.entries[0].size, list.entries[0].kind),
        (11, FileKind::File)
    );
}

#[tokio::test]
async fn a_symlink_out_of_the_working_directory_is_refused_and_nothing_outside_is_touched() {
    let tmp = tempfile::tempdir().unwrap();
    let (inside, outside) = (tmp.path().join("root"), tmp.path().join("outside"));
    std::fs::create_dir_all(&inside).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "s").unwrap();
    std::os::unix::fs::symlink(&outside, inside.join("link")).unwrap();
    std::os::unix::fs::symlink("/etc", inside.join("etc")).unwrap();
    let root = Root::open(&inside).unwrap();

    let e = read(&root, &rel("etc/passwd")).await.err().unwrap();
    assert_eq!(e.status, 403);
    let e = read(&root, &rel("link/secret")).await.err().unwrap();
    assert_eq!(e.status, 403);
    let e = write(&root, &rel("link/planted"), body(&[b"x"]), 10)
        .await
        .unwrap_err();
    assert_eq!(e.status, 403, "{e:?}");
    let e = remove(&root, &rel("link/secret")).await.unwrap_err();
    assert_eq!(e.status, 403);
    let mut names: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["secret"]);
}

#[tokio::test]
async fn a_file_over_the_limit_is_refused_and_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let root = Root::open(tmp.path()).unwrap();
    std::fs::write(tmp.path().join("kept"), "old").unwrap();
    let e = write(&root, &rel("kept"), body(&[b"0123456789", b"0"]), 10)
        .await
        .unwrap_err();
    assert_eq!((e.status, e.reason), (413, "FILE_TOO_LARGE"));
    assert_eq!(std::fs::read(tmp.path().join("kept")).unwrap(), b"old");
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
}

#[tokio::test]
async fn a_directory_is_neither_overwritten_nor_removed() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("d")).unwrap();
    let root = Root::open(tmp.path()).unwrap();
    let e = write(&root, &rel("d"), body(&[b"x"]), 10)
        .await
        .unwrap_err();
    assert_eq!(e.reason, "IS_A_DIRECTORY");
    let e = remove(&root, &rel("d")).await.unwrap_err();
    assert_eq!(e.reason, "IS_A_DIRECTORY");
    assert!(tmp.path().join("d").is_dir());
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
}

#[test]
fn a_full_disk_is_resource_exhausted_and_an_escape_is_permission_denied() {
    let full = FileError::io(io::Error::from(io::ErrorKind::StorageFull), "big.bin");
    assert_eq!(
        (full.status, full.code, full.reason),
        (507, "RESOURCE_EXHAUSTED", "DISK_FULL")
    );
    let escape = io::Error::new(
        io::ErrorKind::PermissionDenied,
        "a path led outside of the filesystem",
    );
    let e = FileError::io(escape, "link/x");
    assert_eq!((e.status, e.code), (403, "PERMISSION_DENIED"));
    assert_eq!(e.status_body().error.reason(), Some("PERMISSION_DENIED"));
}
