//! Values crossing the SQL surface: parameters ([`ToParam`], bound as SQLite's loose types or
//! as whatever PostgreSQL infers for the placeholder) and columns ([`FromColumn`], read from
//! either engine's row into the same Rust types).

use super::{Error, Result};
use tokio_postgres::types::{IsNull, Type};

/// A parameter's value, in SQLite's five kinds plus booleans.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value<'a> {
    Null,
    Int(i64),
    Real(f64),
    Bool(bool),
    Text(&'a str),
    Blob(&'a [u8]),
}

/// What can be bound to a placeholder.
pub(crate) trait ToParam {
    fn to_param(&self) -> Value<'_>;
}

impl<T: ToParam + ?Sized> ToParam for &T {
    fn to_param(&self) -> Value<'_> {
        (**self).to_param()
    }
}

impl<T: ToParam> ToParam for Option<T> {
    fn to_param(&self) -> Value<'_> {
        match self {
            Some(value) => value.to_param(),
            None => Value::Null,
        }
    }
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl ToParam for $t {
            fn to_param(&self) -> Value<'_> {
                Value::Int(i64::from(*self))
            }
        }
    )*};
}
int_param!(i64, i32, u32, u16, u8);

impl ToParam for bool {
    fn to_param(&self) -> Value<'_> {
        Value::Bool(*self)
    }
}

impl ToParam for f64 {
    fn to_param(&self) -> Value<'_> {
        Value::Real(*self)
    }
}

impl ToParam for f32 {
    fn to_param(&self) -> Value<'_> {
        Value::Real(f64::from(*self))
    }
}

impl ToParam for str {
    fn to_param(&self) -> Value<'_> {
        Value::Text(self)
    }
}

impl ToParam for String {
    fn to_param(&self) -> Value<'_> {
        Value::Text(self)
    }
}

impl ToParam for [u8] {
    fn to_param(&self) -> Value<'_> {
        Value::Blob(self)
    }
}

impl ToParam for Vec<u8> {
    fn to_param(&self) -> Value<'_> {
        Value::Blob(self)
    }
}

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match *self {
            Value::Null => ValueRef::Null,
            Value::Int(v) => ValueRef::Integer(v),
            Value::Real(v) => ValueRef::Real(v),
            Value::Bool(v) => ValueRef::Integer(i64::from(v)),
            Value::Text(v) => ValueRef::Text(v.as_bytes()),
            Value::Blob(v) => ValueRef::Blob(v),
        }))
    }
}

/// A parameter PostgreSQL cannot take as the type it inferred for its placeholder.
#[derive(Debug, thiserror::Error)]
#[error("a {given} parameter where PostgreSQL expects {expected}")]
struct Mismatch {
    given: &'static str,
    expected: String,
}

impl tokio_postgres::types::ToSql for Value<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut tokio_postgres::types::private::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let mismatch = || -> Box<dyn std::error::Error + Sync + Send> {
            Box::new(Mismatch {
                given: self.kind(),
                expected: ty.name().to_owned(),
            })
        };
        match (*self, ty) {
            (Value::Null, _) => return Ok(IsNull::Yes),
            (Value::Int(v), &Type::INT8) => out.extend_from_slice(&(v).to_be_bytes()),
            (Value::Int(v), &Type::INT4) => {
                out.extend_from_slice(&(i32::try_from(v).map_err(|_| mismatch())?).to_be_bytes())
            }
            (Value::Int(v), &Type::INT2) => {
                out.extend_from_slice(&(i16::try_from(v).map_err(|_| mismatch())?).to_be_bytes())
            }
            (Value::Bool(v), &Type::INT8) => out.extend_from_slice(&(i64::from(v)).to_be_bytes()),
            (Value::Bool(v), &Type::BOOL) => out.extend_from_slice(&[u8::from(v)]),
            (Value::Int(v), &Type::BOOL) => out.extend_from_slice(&[u8::from(v != 0)]),
            (Value::Real(v), &Type::FLOAT8) => out.extend_from_slice(&(v).to_be_bytes()),
            // Precision beyond f32's is dropped, as the column's type says.
            #[expect(clippy::cast_possible_truncation, reason = "the column is float4")]
            (Value::Real(v), &Type::FLOAT4) => out.extend_from_slice(&(v as f32).to_be_bytes()),
            #[expect(clippy::cast_precision_loss, reason = "SQLite converts the same way")]
            (Value::Int(v), &Type::FLOAT8) => out.extend_from_slice(&(v as f64).to_be_bytes()),
            (Value::Text(v), &Type::TEXT | &Type::VARCHAR | &Type::BPCHAR | &Type::NAME) => {
                out.extend_from_slice(v.as_bytes());
            }
            (Value::Int(v), &Type::TEXT | &Type::VARCHAR) => {
                out.extend_from_slice(v.to_string().as_bytes())
            }
            (Value::Text(v), &Type::JSONB) => {
                out.extend_from_slice(&[1]);
                out.extend_from_slice(v.as_bytes());
            }
            (Value::Text(v), &Type::JSON) => out.extend_from_slice(v.as_bytes()),
            (Value::Blob(v), &Type::BYTEA) => out.extend_from_slice(v),
            _ => return Err(mismatch()),
        }
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        // Each value checks its placeholder's type as it is written.
        true
    }

    tokio_postgres::types::to_sql_checked!();
}

impl Value<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Int(_) => "integer",
            Value::Real(_) => "real",
            Value::Bool(_) => "boolean",
            Value::Text(_) => "text",
            Value::Blob(_) => "blob",
        }
    }
}

/// A column as PostgreSQL sent it: its type and its bytes in the binary format.
struct Raw<'a> {
    ty: Type,
    bytes: Option<&'a [u8]>,
}

impl<'a> tokio_postgres::types::FromSql<'a> for Raw<'a> {
    fn from_sql(
        ty: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw {
            ty: ty.clone(),
            bytes: Some(raw),
        })
    }

    fn from_sql_null(
        ty: &Type,
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw {
            ty: ty.clone(),
            bytes: None,
        })
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

fn raw(row: &tokio_postgres::Row, index: usize) -> Result<Raw<'_>> {
    row.try_get::<_, Raw<'_>>(index).map_err(|e| Error::Column {
        index,
        message: e.to_string(),
    })
}

/// What a column can be read as.
pub(crate) trait FromColumn: Sized {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self>;
    fn from_postgres(row: &tokio_postgres::Row, index: usize) -> Result<Self>;
}

/// A value read from PostgreSQL's binary format, for a non-null column.
trait Decode: Sized {
    fn decode(ty: &Type, bytes: &[u8]) -> Option<Self>;
}

fn decoded<T: Decode>(row: &tokio_postgres::Row, index: usize) -> Result<Option<T>> {
    let raw = raw(row, index)?;
    match raw.bytes {
        None => Ok(None),
        Some(bytes) => T::decode(&raw.ty, bytes)
            .map(Some)
            .ok_or_else(|| Error::Column {
                index,
                message: format!(
                    "a {} column cannot be read as {}",
                    raw.ty.name(),
                    std::any::type_name::<T>()
                ),
            }),
    }
}

fn be<const N: usize>(bytes: &[u8]) -> Option<[u8; N]> {
    bytes.try_into().ok()
}

impl Decode for i64 {
    fn decode(ty: &Type, bytes: &[u8]) -> Option<i64> {
        match *ty {
            Type::INT8 => Some(i64::from_be_bytes(be(bytes)?)),
            Type::INT4 => Some(i64::from(i32::from_be_bytes(be(bytes)?))),
            Type::INT2 => Some(i64::from(i16::from_be_bytes(be(bytes)?))),
            Type::BOOL => Some(i64::from(*bytes.first()?)),
            // What PostgreSQL's sum() of integers returns.
            Type::NUMERIC => numeric_integer(bytes),
            _ => None,
        }
    }
}

/// A NUMERIC in PostgreSQL's binary format (digit count, weight, sign, scale, then base-10000
/// digits) as an integer, when it is one that fits.
fn numeric_integer(bytes: &[u8]) -> Option<i64> {
    let word = |i: usize| -> Option<u16> { Some(u16::from_be_bytes(be(bytes.get(i..i + 2)?)?)) };
    let digits = usize::from(word(0)?);
    let weight = i16::from_be_bytes(word(2)?.to_be_bytes());
    let sign = word(4)?;
    let mut value: i64 = 0;
    for i in 0..digits {
        let position = i16::try_from(i).ok()?;
        let digit = i64::from(word(8 + 2 * i)?);
        if position > weight {
            // A fractional digit: an integer has none but zeros.
            if digit != 0 {
                return None;
            }
            continue;
        }
        value = value.checked_mul(10_000)?.checked_add(digit)?;
    }
    // Trailing zero groups are left out of the digits: the weight says how many.
    let shown = i16::try_from(digits).ok()?;
    for _ in shown..=weight {
        value = value.checked_mul(10_000)?;
    }
    match sign {
        0x0000 => Some(value),
        0x4000 => value.checked_neg(),
        _ => None,
    }
}

impl Decode for bool {
    fn decode(ty: &Type, bytes: &[u8]) -> Option<bool> {
        match *ty {
            Type::BOOL => Some(*bytes.first()? != 0),
            _ => i64::decode(ty, bytes).map(|v| v != 0),
        }
    }
}

impl Decode for f64 {
    fn decode(ty: &Type, bytes: &[u8]) -> Option<f64> {
        match *ty {
            Type::FLOAT8 => Some(f64::from_be_bytes(be(bytes)?)),
            Type::FLOAT4 => Some(f64::from(f32::from_be_bytes(be(bytes)?))),
            #[expect(clippy::cast_precision_loss, reason = "SQLite converts the same way")]
            _ => i64::decode(ty, bytes).map(|v| v as f64),
        }
    }
}

impl Decode for String {
    fn decode(ty: &Type, bytes: &[u8]) -> Option<String> {
        match *ty {
            Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::JSON => {
                String::from_utf8(bytes.to_vec()).ok()
            }
            Type::JSONB => String::from_utf8(bytes.get(1..)?.to_vec()).ok(),
            _ => None,
        }
    }
}

impl Decode for Vec<u8> {
    fn decode(ty: &Type, bytes: &[u8]) -> Option<Vec<u8>> {
        (*ty == Type::BYTEA).then(|| bytes.to_vec())
    }
}

macro_rules! column {
    ($($t:ty),*) => {$(
        impl FromColumn for $t {
            fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
                row.get(index)
            }
            fn from_postgres(row: &tokio_postgres::Row, index: usize) -> Result<Self> {
                decoded::<$t>(row, index)?.ok_or_else(|| Error::Column {
                    index,
                    message: "NULL where a value is required".into(),
                })
            }
        }
        impl FromColumn for Option<$t> {
            fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
                row.get(index)
            }
            fn from_postgres(row: &tokio_postgres::Row, index: usize) -> Result<Self> {
                decoded::<$t>(row, index)
            }
        }
    )*};
}
column!(i64, bool, f64, String, Vec<u8>);

impl FromColumn for u32 {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        row.get(index)
    }
    fn from_postgres(row: &tokio_postgres::Row, index: usize) -> Result<Self> {
        let value: i64 = FromColumn::from_postgres(row, index)?;
        u32::try_from(value).map_err(|_| Error::Column {
            index,
            message: format!("{value} is out of range for a 32-bit count"),
        })
    }
}

/// A value read as it is stored, whatever its type (copying rows between databases).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Stored {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl ToParam for Stored {
    fn to_param(&self) -> Value<'_> {
        match self {
            Stored::Null => Value::Null,
            Stored::Int(v) => Value::Int(*v),
            Stored::Real(v) => Value::Real(*v),
            Stored::Text(v) => Value::Text(v),
            Stored::Blob(v) => Value::Blob(v),
        }
    }
}

impl FromColumn for Stored {
    fn from_sqlite(row: &rusqlite::Row<'_>, index: usize) -> rusqlite::Result<Self> {
        use rusqlite::types::ValueRef;
        Ok(match row.get_ref(index)? {
            ValueRef::Null => Stored::Null,
            ValueRef::Integer(v) => Stored::Int(v),
            ValueRef::Real(v) => Stored::Real(v),
            ValueRef::Text(v) => Stored::Text(String::from_utf8_lossy(v).into_owned()),
            ValueRef::Blob(v) => Stored::Blob(v.to_vec()),
        })
    }

    fn from_postgres(row: &tokio_postgres::Row, index: usize) -> Result<Self> {
        let raw = raw(row, index)?;
        let Some(bytes) = raw.bytes else {
            return Ok(Stored::Null);
        };
        let unreadable = || Error::Column {
            index,
            message: format!("a {} column cannot be copied", raw.ty.name()),
        };
        Ok(match raw.ty {
            Type::INT2 | Type::INT4 | Type::INT8 | Type::BOOL | Type::NUMERIC => {
                Stored::Int(i64::decode(&raw.ty, bytes).ok_or_else(unreadable)?)
            }
            Type::FLOAT4 | Type::FLOAT8 => {
                Stored::Real(f64::decode(&raw.ty, bytes).ok_or_else(unreadable)?)
            }
            Type::BYTEA => Stored::Blob(bytes.to_vec()),
            _ => Stored::Text(String::decode(&raw.ty, bytes).ok_or_else(unreadable)?),
        })
    }
}
