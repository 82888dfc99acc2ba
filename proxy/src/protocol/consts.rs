//! Protocol constants: capability flags, command bytes, server status flags.

use std::fmt;

/// Capability flags, 64 bits: MySQL's 32 and, above them, MariaDB's extended ones (sent in
/// the handshake filler when the `MYSQL` bit is clear).
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities(pub u64);

impl Capabilities {
    /// Set by MySQL servers and clients; clear in MariaDB's, which then use the extended bits.
    pub const MYSQL: u64 = 1;
    pub const FOUND_ROWS: u64 = 1 << 1;
    pub const LONG_FLAG: u64 = 1 << 2;
    pub const CONNECT_WITH_DB: u64 = 1 << 3;
    pub const NO_SCHEMA: u64 = 1 << 4;
    pub const COMPRESS: u64 = 1 << 5;
    pub const ODBC: u64 = 1 << 6;
    pub const LOCAL_FILES: u64 = 1 << 7;
    pub const IGNORE_SPACE: u64 = 1 << 8;
    pub const PROTOCOL_41: u64 = 1 << 9;
    pub const INTERACTIVE: u64 = 1 << 10;
    pub const SSL: u64 = 1 << 11;
    pub const IGNORE_SIGPIPE: u64 = 1 << 12;
    pub const TRANSACTIONS: u64 = 1 << 13;
    pub const RESERVED: u64 = 1 << 14;
    pub const SECURE_CONNECTION: u64 = 1 << 15;
    pub const MULTI_STATEMENTS: u64 = 1 << 16;
    pub const MULTI_RESULTS: u64 = 1 << 17;
    pub const PS_MULTI_RESULTS: u64 = 1 << 18;
    pub const PLUGIN_AUTH: u64 = 1 << 19;
    pub const CONNECT_ATTRS: u64 = 1 << 20;
    pub const PLUGIN_AUTH_LENENC_DATA: u64 = 1 << 21;
    pub const CAN_HANDLE_EXPIRED_PASSWORDS: u64 = 1 << 22;
    pub const SESSION_TRACK: u64 = 1 << 23;
    pub const DEPRECATE_EOF: u64 = 1 << 24;
    pub const OPTIONAL_RESULTSET_METADATA: u64 = 1 << 25;
    pub const ZSTD_COMPRESSION: u64 = 1 << 26;
    pub const QUERY_ATTRIBUTES: u64 = 1 << 27;
    pub const MULTI_FACTOR_AUTH: u64 = 1 << 28;
    /// MySQL: CLIENT_CAPABILITY_EXTENSION; MariaDB: CLIENT_PROGRESS_OBSOLETE.
    pub const BIT_29: u64 = 1 << 29;
    pub const SSL_VERIFY_SERVER_CERT: u64 = 1 << 30;
    pub const REMEMBER_OPTIONS: u64 = 1 << 31;
    pub const MARIADB_PROGRESS: u64 = 1 << 32;
    pub const MARIADB_COM_MULTI: u64 = 1 << 33;
    pub const MARIADB_STMT_BULK_OPERATIONS: u64 = 1 << 34;
    pub const MARIADB_EXTENDED_TYPE_INFO: u64 = 1 << 35;
    pub const MARIADB_CACHE_METADATA: u64 = 1 << 36;

    /// What freshet can relay faithfully. Everything else is masked out of the server's
    /// handshake before the client sees it, and out of the client's reply:
    /// - ZSTD_COMPRESSION: MySQL 8's zstd would need the C libzstd (zlib, COMPRESS, is relayed);
    /// - SSL: TLS is per leg, added by freshet to each side's offer on its own;
    /// - OPTIONAL_RESULTSET_METADATA, MARIADB_CACHE_METADATA: result sets without column
    ///   definitions, which freshet must see to find the end of a result set;
    /// - QUERY_ATTRIBUTES: changes the COM_QUERY layout that query matching will read;
    /// - MULTI_FACTOR_AUTH: its extra authentication round trips are not tested here;
    /// - MARIADB_PROGRESS: progress packets in the middle of results; MARIADB_COM_MULTI:
    ///   several commands in one packet; bit 29 and REMEMBER_OPTIONS: client-side only.
    pub const RELAYABLE: u64 = Self::MYSQL
        | Self::COMPRESS
        | Self::FOUND_ROWS
        | Self::LONG_FLAG
        | Self::CONNECT_WITH_DB
        | Self::NO_SCHEMA
        | Self::ODBC
        | Self::LOCAL_FILES
        | Self::IGNORE_SPACE
        | Self::PROTOCOL_41
        | Self::INTERACTIVE
        | Self::IGNORE_SIGPIPE
        | Self::TRANSACTIONS
        | Self::RESERVED
        | Self::SECURE_CONNECTION
        | Self::MULTI_STATEMENTS
        | Self::MULTI_RESULTS
        | Self::PS_MULTI_RESULTS
        | Self::PLUGIN_AUTH
        | Self::CONNECT_ATTRS
        | Self::PLUGIN_AUTH_LENENC_DATA
        | Self::CAN_HANDLE_EXPIRED_PASSWORDS
        | Self::SESSION_TRACK
        | Self::DEPRECATE_EOF
        | Self::MARIADB_STMT_BULK_OPERATIONS
        | Self::MARIADB_EXTENDED_TYPE_INFO;

    pub fn has(self, flag: u64) -> bool {
        self.0 & flag != 0
    }

    pub fn lower(self) -> u32 {
        self.0 as u32
    }

    pub fn extended(self) -> u32 {
        (self.0 >> 32) as u32
    }

    pub fn from_parts(lower: u32, extended: u32) -> Self {
        Capabilities(u64::from(lower) | (u64::from(extended) << 32))
    }
}

impl fmt::Debug for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Capabilities({:#x})", self.0)
    }
}

/// Server status flags, as carried by OK and EOF packets.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct StatusFlags(pub u16);

impl StatusFlags {
    pub const IN_TRANS: u16 = 1;
    pub const AUTOCOMMIT: u16 = 1 << 1;
    pub const MORE_RESULTS_EXISTS: u16 = 1 << 3;
    pub const NO_GOOD_INDEX_USED: u16 = 1 << 4;
    pub const NO_INDEX_USED: u16 = 1 << 5;
    pub const CURSOR_EXISTS: u16 = 1 << 6;
    pub const LAST_ROW_SENT: u16 = 1 << 7;
    pub const NO_BACKSLASH_ESCAPES: u16 = 1 << 9;
    pub const QUERY_WAS_SLOW: u16 = 1 << 11;
    pub const IN_TRANS_READONLY: u16 = 1 << 13;
    pub const SESSION_STATE_CHANGED: u16 = 1 << 14;
    /// MariaDB's: the session's sql_mode has ANSI_QUOTES.
    pub const ANSI_QUOTES: u16 = 1 << 15;

    /// The flags that describe the session, not the statement: every reply carries them as
    /// they are. The others (cursor, last row, more results, the index flags, slow, database
    /// dropped, metadata changed, out parameters, session state changed) are the statement's.
    pub const SESSION: u16 = Self::IN_TRANS | Self::AUTOCOMMIT | Self::NO_BACKSLASH_ESCAPES | Self::IN_TRANS_READONLY | Self::ANSI_QUOTES;

    pub fn has(self, flag: u16) -> bool {
        self.0 & flag != 0
    }
}

/// Command bytes (the first byte of every packet a client sends in the command phase). The
/// enum's order is the metrics label order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Command {
    Sleep = 0x00,
    Quit = 0x01,
    InitDb = 0x02,
    Query = 0x03,
    FieldList = 0x04,
    CreateDb = 0x05,
    DropDb = 0x06,
    Refresh = 0x07,
    Shutdown = 0x08,
    Statistics = 0x09,
    ProcessInfo = 0x0a,
    Connect = 0x0b,
    ProcessKill = 0x0c,
    Debug = 0x0d,
    Ping = 0x0e,
    Time = 0x0f,
    DelayedInsert = 0x10,
    ChangeUser = 0x11,
    BinlogDump = 0x12,
    TableDump = 0x13,
    ConnectOut = 0x14,
    RegisterSlave = 0x15,
    StmtPrepare = 0x16,
    StmtExecute = 0x17,
    StmtSendLongData = 0x18,
    StmtClose = 0x19,
    StmtReset = 0x1a,
    SetOption = 0x1b,
    StmtFetch = 0x1c,
    Daemon = 0x1d,
    BinlogDumpGtid = 0x1e,
    ResetConnection = 0x1f,
    /// MariaDB's COM_STMT_BULK_EXECUTE.
    StmtBulkExecute = 0xfa,
}

impl Command {
    pub const ALL: [Command; 33] = {
        use Command::*;
        [
            Sleep,
            Quit,
            InitDb,
            Query,
            FieldList,
            CreateDb,
            DropDb,
            Refresh,
            Shutdown,
            Statistics,
            ProcessInfo,
            Connect,
            ProcessKill,
            Debug,
            Ping,
            Time,
            DelayedInsert,
            ChangeUser,
            BinlogDump,
            TableDump,
            ConnectOut,
            RegisterSlave,
            StmtPrepare,
            StmtExecute,
            StmtSendLongData,
            StmtClose,
            StmtReset,
            SetOption,
            StmtFetch,
            Daemon,
            BinlogDumpGtid,
            ResetConnection,
            StmtBulkExecute,
        ]
    };

    pub fn from_byte(b: u8) -> Option<Command> {
        match b {
            0x00..=0x1f => Some(Self::ALL[usize::from(b)]),
            0xfa => Some(Command::StmtBulkExecute),
            _ => None,
        }
    }

    /// Position in [`Command::ALL`], for per-command metric arrays.
    pub fn index(self) -> usize {
        match self {
            Command::StmtBulkExecute => 32,
            other => other as usize,
        }
    }

    /// The metrics label: the protocol's name without the COM_ prefix, in lower case.
    pub fn label(self) -> &'static str {
        use Command::*;
        match self {
            Sleep => "sleep",
            Quit => "quit",
            InitDb => "init_db",
            Query => "query",
            FieldList => "field_list",
            CreateDb => "create_db",
            DropDb => "drop_db",
            Refresh => "refresh",
            Shutdown => "shutdown",
            Statistics => "statistics",
            ProcessInfo => "process_info",
            Connect => "connect",
            ProcessKill => "process_kill",
            Debug => "debug",
            Ping => "ping",
            Time => "time",
            DelayedInsert => "delayed_insert",
            ChangeUser => "change_user",
            BinlogDump => "binlog_dump",
            TableDump => "table_dump",
            ConnectOut => "connect_out",
            RegisterSlave => "register_slave",
            StmtPrepare => "stmt_prepare",
            StmtExecute => "stmt_execute",
            StmtSendLongData => "stmt_send_long_data",
            StmtClose => "stmt_close",
            StmtReset => "stmt_reset",
            SetOption => "set_option",
            StmtFetch => "stmt_fetch",
            Daemon => "daemon",
            BinlogDumpGtid => "binlog_dump_gtid",
            ResetConnection => "reset_connection",
            StmtBulkExecute => "stmt_bulk_execute",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_table_is_consistent() {
        for (i, c) in Command::ALL.iter().enumerate() {
            assert_eq!(c.index(), i);
            assert_eq!(Command::from_byte(*c as u8), Some(*c));
        }
        assert_eq!(Command::from_byte(0x20), None);
        assert_eq!(Command::from_byte(0xff), None);
    }
}
