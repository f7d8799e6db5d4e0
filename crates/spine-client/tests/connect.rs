//! `Endpoint::connect` holds the connection its endpoint came over: the adapter's watch
//! sees the endpoint in use while it lives and gone once it is dropped.

use std::os::unix::net::UnixListener;

use spine_client::{Endpoint, Layout};
use spine_endpoint::{send_fds, AdapterEnd, ClientWatch};

#[test]
fn a_connected_endpoint_lives_as_long_as_its_connection() {
    let dir = std::env::temp_dir().join(format!("spine-connect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ep.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let app = std::thread::spawn({
        let path = path.clone();
        move || Endpoint::connect(path).unwrap()
    });
    let (sock, _) = listener.accept().unwrap();
    let mut end = AdapterEnd::create(Layout::new(8, 2048, 8).unwrap()).unwrap();
    send_fds(&sock, &[end.shm().fd()]).unwrap();
    let watch = ClientWatch::new(sock.into());
    let mut ep = app.join().unwrap();
    assert!(!watch.check().unwrap(), "in use");
    assert!(ep.send_with(3, |b| b.copy_from_slice(b"abc")));
    let mut buf = [0u8; 64];
    assert_eq!(end.take(&mut buf), Some(3));
    assert!(!watch.check().unwrap(), "still in use");
    drop(ep);
    assert!(watch.check().unwrap(), "given up with the endpoint");
    let _ = std::fs::remove_dir_all(&dir);
}
