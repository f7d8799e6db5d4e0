//! The bpf(2) system call itself: command numbers, the attribute layouts of
//! `include/uapi/linux/bpf.h` for the commands spine uses, and the one function that
//! enters the kernel. Every other module builds an attribute and calls [`bpf`].
//!
//! Attributes are written into a zeroed [`BpfAttr`] union and the whole union is passed:
//! the kernel refuses a command whose bytes past its last field are not zero, and every
//! layout here has explicit padding, so no byte the kernel reads is ever uninitialised.

use std::mem::size_of;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use crate::SysError;

/// `BPF_OBJ_NAME_LEN`: object names are at most 15 bytes plus a NUL.
pub(crate) const OBJ_NAME_LEN: usize = 16;

/// `enum bpf_cmd` values spine uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum Cmd {
    MapCreate = 0,
    MapLookupElem = 1,
    MapUpdateElem = 2,
    MapDeleteElem = 3,
    MapGetNextKey = 4,
    ProgLoad = 5,
    ProgTestRun = 10,
    ProgGetFdById = 13,
    ObjGetInfoByFd = 15,
    BtfLoad = 18,
    MapLookupAndDeleteElem = 21,
    MapFreeze = 22,
    LinkCreate = 28,
}

impl Cmd {
    /// The kernel's name for the command, used as [`SysError::op`].
    pub(crate) fn name(self) -> &'static str {
        match self {
            Cmd::MapCreate => "BPF_MAP_CREATE",
            Cmd::MapLookupElem => "BPF_MAP_LOOKUP_ELEM",
            Cmd::MapUpdateElem => "BPF_MAP_UPDATE_ELEM",
            Cmd::MapDeleteElem => "BPF_MAP_DELETE_ELEM",
            Cmd::MapGetNextKey => "BPF_MAP_GET_NEXT_KEY",
            Cmd::ProgLoad => "BPF_PROG_LOAD",
            Cmd::ProgTestRun => "BPF_PROG_TEST_RUN",
            Cmd::ProgGetFdById => "BPF_PROG_GET_FD_BY_ID",
            Cmd::ObjGetInfoByFd => "BPF_OBJ_GET_INFO_BY_FD",
            Cmd::LinkCreate => "BPF_LINK_CREATE",
            Cmd::MapFreeze => "BPF_MAP_FREEZE",
            Cmd::MapLookupAndDeleteElem => "BPF_MAP_LOOKUP_AND_DELETE_ELEM",
            Cmd::BtfLoad => "BPF_BTF_LOAD",
        }
    }
}

/// `BPF_MAP_CREATE`, up to `map_extra`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MapCreateAttr {
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
    pub inner_map_fd: u32,
    pub numa_node: u32,
    pub map_name: [u8; OBJ_NAME_LEN],
    pub map_ifindex: u32,
    pub btf_fd: u32,
    pub btf_key_type_id: u32,
    pub btf_value_type_id: u32,
    pub btf_vmlinux_value_type_id: u32,
    pub map_extra: u64,
}

/// `BPF_MAP_*_ELEM`, `BPF_MAP_GET_NEXT_KEY` (`value` is `next_key`) and `BPF_MAP_FREEZE`
/// (only `map_fd`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MapElemAttr {
    pub map_fd: u32,
    pub _pad: u32,
    pub key: u64,
    pub value: u64,
    pub flags: u64,
}

/// `BPF_PROG_LOAD`, up to `log_true_size` (an output since Linux 6.4; older kernels
/// leave it zero).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProgLoadAttr {
    pub prog_type: u32,
    pub insn_cnt: u32,
    pub insns: u64,
    pub license: u64,
    pub log_level: u32,
    pub log_size: u32,
    pub log_buf: u64,
    pub kern_version: u32,
    pub prog_flags: u32,
    pub prog_name: [u8; OBJ_NAME_LEN],
    pub prog_ifindex: u32,
    pub expected_attach_type: u32,
    pub prog_btf_fd: u32,
    pub func_info_rec_size: u32,
    pub func_info: u64,
    pub func_info_cnt: u32,
    pub line_info_rec_size: u32,
    pub line_info: u64,
    pub line_info_cnt: u32,
    pub attach_btf_id: u32,
    pub attach_prog_fd: u32,
    pub core_relo_cnt: u32,
    pub fd_array: u64,
    pub core_relos: u64,
    pub core_relo_rec_size: u32,
    pub log_true_size: u32,
}

/// `BPF_PROG_TEST_RUN`, up to `batch_size`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TestRunAttr {
    pub prog_fd: u32,
    pub retval: u32,
    pub data_size_in: u32,
    pub data_size_out: u32,
    pub data_in: u64,
    pub data_out: u64,
    pub repeat: u32,
    pub duration: u32,
    pub ctx_size_in: u32,
    pub ctx_size_out: u32,
    pub ctx_in: u64,
    pub ctx_out: u64,
    pub flags: u32,
    pub cpu: u32,
    pub batch_size: u32,
    pub _pad: u32,
}

/// `BPF_BTF_LOAD`, up to `btf_log_true_size`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BtfLoadAttr {
    pub btf: u64,
    pub btf_log_buf: u64,
    pub btf_size: u32,
    pub btf_log_size: u32,
    pub btf_log_level: u32,
    pub btf_log_true_size: u32,
}

/// `BPF_OBJ_GET_INFO_BY_FD`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct InfoAttr {
    pub bpf_fd: u32,
    pub info_len: u32,
    pub info: u64,
}

/// `BPF_PROG_GET_FD_BY_ID` (`prog_id`, `next_id`, `open_flags`), padded to 16 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GetFdByIdAttr {
    pub id: u32,
    pub next_id: u32,
    pub open_flags: u32,
    pub _pad: u32,
}

/// `BPF_LINK_CREATE`, the fields every attach type shares; the per-type union after them
/// stays zero (XDP uses none of it).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LinkCreateAttr {
    pub prog_fd: u32,
    pub target_ifindex: u32,
    pub attach_type: u32,
    pub flags: u32,
}

// No implicit padding anywhere: every byte handed to the kernel is a written field.
const _: () = assert!(size_of::<MapCreateAttr>() == 72);
const _: () = assert!(size_of::<MapElemAttr>() == 32);
const _: () = assert!(size_of::<ProgLoadAttr>() == 144);
const _: () = assert!(size_of::<TestRunAttr>() == 80);
const _: () = assert!(size_of::<InfoAttr>() == 16);
const _: () = assert!(size_of::<GetFdByIdAttr>() == 16);
const _: () = assert!(size_of::<LinkCreateAttr>() == 16);

const ATTR_WORDS: usize = 18;

/// `union bpf_attr`, as far as spine uses it. Built zeroed by [`BpfAttr::zeroed`]; a
/// command's struct is then written whole, so the bytes after it stay zero.
#[repr(C)]
pub(crate) union BpfAttr {
    raw: [u64; ATTR_WORDS],
    pub map_create: MapCreateAttr,
    pub map_elem: MapElemAttr,
    pub prog_load: ProgLoadAttr,
    pub test_run: TestRunAttr,
    pub info: InfoAttr,
    pub get_fd_by_id: GetFdByIdAttr,
    pub link_create: LinkCreateAttr,
    pub btf_load: BtfLoadAttr,
}

const _: () = assert!(size_of::<BpfAttr>() == ATTR_WORDS * 8);

impl BpfAttr {
    pub(crate) fn zeroed() -> Self {
        BpfAttr { raw: [0; ATTR_WORDS] }
    }

    /// The `BPF_PROG_LOAD` view, as the kernel left it (it writes `log_true_size`).
    pub(crate) fn prog_load_out(&self) -> ProgLoadAttr {
        // SAFETY: every bit pattern is a valid `ProgLoadAttr` (integers and byte arrays
        // only) and the union is at least as large as it.
        unsafe { self.prog_load }
    }

    /// The `BPF_PROG_TEST_RUN` view, as the kernel left it (it writes `retval`,
    /// `duration`, `data_size_out` and `ctx_size_out`).
    pub(crate) fn test_run_out(&self) -> TestRunAttr {
        // SAFETY: as in `prog_load_out`: plain integers, any bits are valid.
        unsafe { self.test_run }
    }
}

/// A user pointer for the kernel: null for an empty slice, as the kernel expects for a
/// zero-sized key (it rejects a non-null key pointer when `key_size` is 0).
pub(crate) fn uptr(bytes: &[u8]) -> u64 {
    if bytes.is_empty() {
        0
    } else {
        bytes.as_ptr() as u64
    }
}

/// Mutable counterpart of [`uptr`].
pub(crate) fn uptr_mut(bytes: &mut [u8]) -> u64 {
    if bytes.is_empty() {
        0
    } else {
        bytes.as_mut_ptr() as u64
    }
}

/// A length for a 32-bit attribute field; `E2BIG` if it does not fit.
pub(crate) fn len_u32(cmd: Cmd, len: usize) -> Result<u32, SysError> {
    u32::try_from(len).map_err(|_| SysError::new(cmd.name(), libc::E2BIG))
}

/// Runs one bpf(2) command and returns the kernel's non-negative result.
///
/// # Safety
///
/// Every user pointer in `attr` must be null or valid for the reads and writes that the
/// kernel does for `cmd`, over the lengths the attribute (or the object the fd names)
/// implies: for map element commands, `key_size` bytes of key and the user value size
/// of value; for program loads, `insn_cnt * 8` bytes of code, a NUL-terminated license
/// and `log_size` bytes of log; for test runs, each buffer's stated size.
pub(crate) unsafe fn bpf(cmd: Cmd, attr: &mut BpfAttr) -> Result<i64, SysError> {
    // SAFETY: `attr` is a live, exclusively borrowed union of `size_of::<BpfAttr>()`
    // bytes; the pointers inside it are the caller's responsibility (see above).
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_int,
            attr as *mut BpfAttr,
            size_of::<BpfAttr>() as libc::c_uint,
        )
    };
    if ret < 0 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
        Err(SysError::new(cmd.name(), errno))
    } else {
        Ok(ret)
    }
}

/// Runs a command whose result is a new file descriptor and takes ownership of it.
///
/// # Safety
///
/// As for [`bpf`]; `cmd` must be one that returns a new fd on success.
pub(crate) unsafe fn bpf_fd(cmd: Cmd, attr: &mut BpfAttr) -> Result<OwnedFd, SysError> {
    // SAFETY: forwarded from this function's own contract.
    let ret = unsafe { bpf(cmd, attr) }?;
    let fd = RawFd::try_from(ret).map_err(|_| SysError::new(cmd.name(), libc::EBADF))?;
    // SAFETY: on success these commands return a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Fills `info` (a `struct bpf_map_info` / `bpf_prog_info` prefix) for `fd`; returns the
/// number of bytes the kernel wrote.
pub(crate) fn obj_info(fd: RawFd, info: &mut [u8]) -> Result<usize, SysError> {
    let mut attr = BpfAttr::zeroed();
    attr.info = InfoAttr {
        bpf_fd: fd as u32,
        info_len: len_u32(Cmd::ObjGetInfoByFd, info.len())?,
        info: uptr_mut(info),
    };
    // SAFETY: the kernel writes at most `info_len` bytes to `info`, which is that long.
    unsafe { bpf(Cmd::ObjGetInfoByFd, &mut attr) }?;
    // SAFETY: integers only; the kernel stores the length it wrote back in `info_len`.
    let written = unsafe { attr.info }.info_len as usize;
    Ok(written.min(info.len()))
}

/// `name` as the kernel accepts an object name: bytes other than ASCII letters, digits,
/// `_` and `.` become `_` (as libbpf sanitises its map names), cut to 15 bytes.
pub fn sanitize_name(name: &str) -> String {
    name.bytes()
        .take(OBJ_NAME_LEN - 1)
        .map(|b| if b.is_ascii_alphanumeric() || b == b'_' || b == b'.' { b as char } else { '_' })
        .collect()
}

/// [`sanitize_name`] as the NUL-padded array of the attribute.
pub(crate) fn name_field(name: &str) -> [u8; OBJ_NAME_LEN] {
    let mut out = [0u8; OBJ_NAME_LEN];
    for (o, b) in out.iter_mut().zip(sanitize_name(name).bytes()) {
        *o = b;
    }
    out
}

/// Decodes a NUL-padded name field.
pub(crate) fn name_from_field(field: &[u8]) -> String {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    String::from_utf8_lossy(&field[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised_and_cut() {
        assert_eq!(sanitize_name("counters"), "counters");
        assert_eq!(sanitize_name(".rodata.str1.1"), ".rodata.str1.1");
        assert_eq!(sanitize_name("my-map!"), "my_map_");
        assert_eq!(sanitize_name("a_very_long_map_name_indeed"), "a_very_long_map");
        assert_eq!(sanitize_name("é"), "__");
        assert_eq!(sanitize_name(""), "");
    }

    #[test]
    fn name_field_is_nul_terminated() {
        let f = name_field("0123456789abcdefghij");
        assert_eq!(&f[..15], b"0123456789abcde");
        assert_eq!(f[15], 0);
        assert_eq!(name_from_field(&f), "0123456789abcde");
        assert_eq!(name_from_field(&name_field("x")), "x");
    }

    #[test]
    fn zeroed_attr_is_all_zero_after_a_field_write() {
        let mut a = BpfAttr::zeroed();
        a.map_elem = MapElemAttr { map_fd: 7, ..Default::default() };
        // SAFETY: reading the raw words of a union built from integers only.
        let raw = unsafe { a.raw };
        assert_eq!(raw[0], 7);
        assert!(raw[1..].iter().all(|&w| w == 0));
    }
}
