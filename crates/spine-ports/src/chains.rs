//! Frames longer than one pool buffer on ports that copy frames to and from the OS
//! (AF_PACKET, TAP): received, such a frame becomes a pool chain
//! ([`spine_pool::Pool::chain`]) whose head holds the first bytes after the headroom and
//! whose fragments hold up to one whole buffer each, from offset 0 (the layout the
//! worker leaves after an `xdp.frags` program); sent, a chain's pieces are gathered into
//! one `iovec` array on the stack for one `sendmsg`/`writev`.
//!
//! Only frames longer than one buffer come here: the single-buffer paths stay as they
//! were. A frame is never half kept: when the pool runs short every buffer taken for it
//! goes back.

use spine_pool::{Buf, Pool, PoolCache, PoolError, MAX_CHAIN};

/// The longest frame one chain holds: the head's room after the headroom and a whole
/// buffer for each of the [`MAX_CHAIN`]` - 1` fragments.
pub(crate) fn chain_room(pool: &Pool) -> usize {
    (pool.buf_size() - pool.headroom()) as usize + (MAX_CHAIN - 1) * pool.buf_size() as usize
}

/// Appends `rest` to the frame in `head` (its only reference) as fragments of up to one
/// buffer each. `Ok(None)` when the pool ran short: `head` and every fragment taken are
/// freed. The caller checked the frame against [`chain_room`].
pub(crate) fn append_frags(
    cache: &mut PoolCache,
    mut head: Buf,
    rest: &[u8],
) -> Result<Option<Buf>, PoolError> {
    let pool = cache.pool().clone();
    for piece in rest.chunks(pool.buf_size() as usize) {
        let Some(mut f) = cache.alloc() else {
            cache.free(head)?;
            return Ok(None);
        };
        let written = pool
            .set_data(&mut f, 0, piece.len() as u32)
            .and_then(|()| pool.data_mut(&mut f).map(|d| d.copy_from_slice(piece)));
        if let Err(e) = written {
            cache.free(f)?;
            cache.free(head)?;
            return Err(e);
        }
        if let Err(e) = pool.chain(&mut head, f) {
            cache.free(e.buf)?;
            cache.free(head)?;
            return Err(e.error);
        }
    }
    Ok(Some(head))
}

/// The pieces of the frame `head` (its packet bytes, then each fragment's) as iovecs
/// for `sendmsg`/`writev`, at most `iov.len()` of them; returns how many and their
/// length. The iovecs point
/// into the pool: valid while `head` is held and not written.
pub(crate) fn gather(
    pool: &Pool,
    head: &Buf,
    data: &[u8],
    iov: &mut [libc::iovec],
) -> (usize, usize) {
    let mut n = 0;
    let mut len = 0;
    for piece in std::iter::once(data).chain(pool.frags(head)).take(iov.len().min(MAX_CHAIN)) {
        iov[n] = libc::iovec { iov_base: piece.as_ptr().cast_mut().cast(), iov_len: piece.len() };
        n += 1;
        len += piece.len();
    }
    (n, len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use spine_pool::PoolConfig;

    #[test]
    fn a_frame_becomes_a_chain_and_gathers_back_whole() {
        let pool = Pool::new(PoolConfig::new(32)).unwrap();
        let mut c = pool.cache();
        let bytes: Vec<u8> = (0..9014u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let room = 1792;
        let mut head = c.alloc().unwrap();
        pool.write_rx(&mut head, &bytes[..room], 3, 9).unwrap();
        let head = append_frags(&mut c, head, &bytes[room..]).unwrap().unwrap();
        assert_eq!(pool.frag_count(&head), 4, "7,222 bytes in buffers of 2,048");
        assert_eq!(pool.frame_len(&head), 9014);
        let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MAX_CHAIN];
        let (n, len) = gather(&pool, &head, pool.data(&head).unwrap(), &mut iov);
        assert_eq!((n, len), (5, 9014));
        let mut back = Vec::new();
        let pieces = std::iter::once(pool.data(&head).unwrap()).chain(pool.frags(&head));
        for (v, piece) in iov[..n].iter().zip(pieces) {
            assert_eq!(
                (v.iov_base.cast_const().cast::<u8>(), v.iov_len),
                (piece.as_ptr(), piece.len())
            );
            back.extend_from_slice(piece);
        }
        assert!(back == bytes);
        assert_eq!(chain_room(&pool), 1792 + 17 * 2048);
        c.free(head).unwrap();
        c.flush();
        assert_eq!(pool.shared_free(), 32);
    }

    #[test]
    fn a_pool_running_short_gets_every_buffer_back() {
        let pool = Pool::new(PoolConfig { cache_batch: 1, ..PoolConfig::new(4) }).unwrap();
        let mut c = pool.cache();
        let mut head = c.alloc().unwrap();
        pool.write(&mut head, &[1; 100]).unwrap();
        // Needs 5 fragments; 3 buffers are left.
        assert!(append_frags(&mut c, head, &[2; 5 * 2048]).unwrap().is_none());
        c.flush();
        assert_eq!(pool.shared_free(), 4);
    }
}
