//! Walking a parsed TOML document with the path of every key at hand, so that each error
//! names the key it is about (`port[1].interface`) and keys nobody asked for are
//! refused rather than silently ignored.

use toml::Value;

use super::{ConfigError, Problem};

/// One TOML table being read: the keys asked for so far are remembered, and
/// [`Table::finish`] refuses the rest.
#[derive(Debug)]
pub(crate) struct Table<'a> {
    path: String,
    t: &'a toml::Table,
    seen: Vec<&'static str>,
}

pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

pub(crate) fn err(path: impl Into<String>, problem: Problem) -> ConfigError {
    ConfigError { path: path.into(), problem }
}

impl<'a> Table<'a> {
    pub(crate) fn new(path: impl Into<String>, t: &'a toml::Table) -> Self {
        Table { path: path.into(), t, seen: Vec::new() }
    }

    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// The path of `key` inside this table.
    pub(crate) fn key_path(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    pub(crate) fn err(&self, key: &str, problem: Problem) -> ConfigError {
        err(self.key_path(key), problem)
    }

    pub(crate) fn get(&mut self, key: &'static str) -> Option<&'a Value> {
        self.seen.push(key);
        self.t.get(key)
    }

    fn wrong(&self, key: &str, expected: &'static str, v: &Value) -> ConfigError {
        self.err(key, Problem::Type { expected, found: type_name(v) })
    }

    pub(crate) fn opt_str(&mut self, key: &'static str) -> Result<Option<&'a str>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(v) => Err(self.wrong(key, "a string", v)),
        }
    }

    pub(crate) fn req_str(&mut self, key: &'static str) -> Result<&'a str, ConfigError> {
        self.opt_str(key)?.ok_or_else(|| self.err(key, Problem::Missing))
    }

    /// An integer in `min..=max`.
    pub(crate) fn opt_int(
        &mut self,
        key: &'static str,
        min: i64,
        max: i64,
    ) -> Result<Option<i64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Integer(i)) if (min..=max).contains(i) => Ok(Some(*i)),
            Some(Value::Integer(i)) => Err(self.err(key, Problem::Range { min, max, got: *i })),
            Some(v) => Err(self.wrong(key, "an integer", v)),
        }
    }

    pub(crate) fn opt_bool(&mut self, key: &'static str) -> Result<Option<bool>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Boolean(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong(key, "a boolean", v)),
        }
    }

    /// One of `allowed`, by name.
    pub(crate) fn opt_choice(
        &mut self,
        key: &'static str,
        allowed: &'static [&'static str],
    ) -> Result<Option<&'static str>, ConfigError> {
        let Some(s) = self.opt_str(key)? else { return Ok(None) };
        allowed
            .iter()
            .copied()
            .find(|a| *a == s)
            .map(Some)
            .ok_or_else(|| self.err(key, Problem::Choice { allowed, got: s.to_string() }))
    }

    pub(crate) fn opt_table(
        &mut self,
        key: &'static str,
    ) -> Result<Option<Table<'a>>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Table(t)) => Ok(Some(Table::new(self.key_path(key), t))),
            Some(v) => Err(self.wrong(key, "a table", v)),
        }
    }

    /// Every key of this table, with its integer value in `min..=max`: a table whose
    /// keys the user names (map sizes by map name).
    pub(crate) fn int_entries(
        &self,
        min: i64,
        max: i64,
    ) -> Result<Vec<(String, i64)>, ConfigError> {
        self.t
            .iter()
            .map(|(k, v)| match v {
                Value::Integer(i) if (min..=max).contains(i) => Ok((k.clone(), *i)),
                Value::Integer(i) => Err(self.err(k, Problem::Range { min, max, got: *i })),
                v => Err(self.wrong(k, "an integer", v)),
            })
            .collect()
    }

    /// An array of tables (`[[key]]`), each with its indexed path (`key[2]`).
    pub(crate) fn tables(&mut self, key: &'static str) -> Result<Vec<Table<'a>>, ConfigError> {
        let Some(v) = self.get(key) else { return Ok(Vec::new()) };
        let Value::Array(items) = v else { return Err(self.wrong(key, "an array of tables", v)) };
        let base = self.key_path(key);
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::Table(t) => Ok(Table::new(format!("{base}[{i}]"), t)),
                other => Err(err(
                    format!("{base}[{i}]"),
                    Problem::Type { expected: "a table", found: type_name(other) },
                )),
            })
            .collect()
    }

    /// An array of strings.
    pub(crate) fn opt_strs(
        &mut self,
        key: &'static str,
    ) -> Result<Option<Vec<String>>, ConfigError> {
        let Some(v) = self.get(key) else { return Ok(None) };
        let Value::Array(items) = v else { return Err(self.wrong(key, "an array of strings", v)) };
        let base = self.key_path(key);
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Ok(s.clone()),
                other => Err(err(
                    format!("{base}[{i}]"),
                    Problem::Type { expected: "a string", found: type_name(other) },
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// An array of integers in `min..=max`.
    pub(crate) fn opt_ints(
        &mut self,
        key: &'static str,
        min: i64,
        max: i64,
    ) -> Result<Option<Vec<i64>>, ConfigError> {
        let Some(v) = self.get(key) else { return Ok(None) };
        let Value::Array(items) = v else { return Err(self.wrong(key, "an array of integers", v)) };
        let base = self.key_path(key);
        items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::Integer(n) if (min..=max).contains(n) => Ok(*n),
                Value::Integer(n) => {
                    Err(err(format!("{base}[{i}]"), Problem::Range { min, max, got: *n }))
                }
                other => Err(err(
                    format!("{base}[{i}]"),
                    Problem::Type { expected: "an integer", found: type_name(other) },
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// Refuses keys that were never asked for: a typo is an error, not a silent default.
    pub(crate) fn finish(self) -> Result<(), ConfigError> {
        let mut unknown: Vec<&String> =
            self.t.keys().filter(|k| !self.seen.contains(&k.as_str())).collect();
        unknown.sort();
        match unknown.first() {
            None => Ok(()),
            Some(k) => {
                let mut allowed = self.seen.clone();
                allowed.sort_unstable();
                allowed.dedup();
                Err(self.err(k, Problem::UnknownKey { allowed: allowed.join(", ") }))
            }
        }
    }
}
