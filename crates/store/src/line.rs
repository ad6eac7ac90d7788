//! A direct serializer for canonical JSON lines: compact JSON with every
//! object's keys sorted, written without building a `serde_json::Value`.
//!
//! Logs and batch appends serialize many records per sync, so the detour
//! through a `Value` tree (a deep copy of every record) would cost more than
//! the write. Here each object's entries are written straight to the output
//! while their keys and places are noted; an object whose keys arrived out of
//! order (or repeated) is cut out and written again in key order, keeping the
//! last of equal keys as a map would. Scalars are formatted by `serde_json`
//! itself, so the bytes are exactly those of `serde_json::to_vec` on the
//! sorted `Value` (a property test pins this).

use std::borrow::Cow;
use std::ops::Range;

use serde::ser::{self, Impossible, Serialize};
use serde_json::Error;

type Result<T, E = Error> = std::result::Result<T, E>;

/// Appends the canonical compact JSON of `value` to `out`.
pub(crate) fn write_canonical<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<()> {
    value.serialize(Canon { out })
}

fn scalar<T: Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) -> Result<()> {
    v.serialize(&mut serde_json::Serializer::new(out))
}

fn key_error() -> Error {
    ser::Error::custom("key must be a string")
}

struct Canon<'a> {
    out: &'a mut Vec<u8>,
}

/// An object being written: entries go straight to `out`; `entries` notes
/// each key and where its value's bytes are.
struct Object<'a> {
    out: &'a mut Vec<u8>,
    /// Where the object's first entry starts (just past `{`).
    start: usize,
    entries: Vec<(Cow<'static, str>, Range<usize>)>,
    in_order: bool,
    pending_key: Option<String>,
    /// For struct variants: `{"Variant":` was written, and one more `}` closes it.
    wrapped: bool,
    /// `serde_json`'s number of arbitrary precision: its one field is the
    /// number's text, written as it is (no braces, no key).
    raw_number: bool,
}

/// The struct name `serde_json` (with `arbitrary_precision`) serializes a
/// `Number` as, holding its exact text.
const RAW_NUMBER: &str = "$serde_json::private::Number";

impl Object<'_> {
    fn value<T: Serialize + ?Sized>(&mut self, key: Cow<'static, str>, value: &T) -> Result<()> {
        if self.raw_number {
            let text = value.serialize(KeySerializer)?;
            self.out.extend_from_slice(text.as_bytes());
            return Ok(());
        }
        if let Some((last, _)) = self.entries.last() {
            self.in_order &= *last < key;
            self.out.push(b',');
        }
        scalar(self.out, key.as_ref())?;
        self.out.push(b':');
        let start = self.out.len();
        value.serialize(Canon { out: self.out })?;
        self.entries.push((key, start..self.out.len()));
        Ok(())
    }

    fn finish(mut self) -> Result<()> {
        if self.raw_number {
            return Ok(());
        }
        if !self.in_order {
            let written = self.out.split_off(self.start);
            // Stable sort, then keep the last of equal keys, as a map insert would.
            self.entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut kept: Vec<&(Cow<'static, str>, Range<usize>)> =
                Vec::with_capacity(self.entries.len());
            for entry in &self.entries {
                match kept.last_mut() {
                    Some(last) if last.0 == entry.0 => *last = entry,
                    _ => kept.push(entry),
                }
            }
            for (i, (key, range)) in kept.into_iter().enumerate() {
                if i > 0 {
                    self.out.push(b',');
                }
                scalar(self.out, key.as_ref())?;
                self.out.push(b':');
                let (from, to) = (range.start - self.start, range.end - self.start);
                self.out.extend_from_slice(&written[from..to]);
            }
        }
        self.out.push(b'}');
        if self.wrapped {
            self.out.push(b'}');
        }
        Ok(())
    }
}

/// An array being written.
struct Array<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    wrapped: bool,
}

impl Array<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        value.serialize(Canon { out: self.out })
    }

    fn finish(self) -> Result<()> {
        self.out.push(b']');
        if self.wrapped {
            self.out.push(b'}');
        }
        Ok(())
    }
}

impl<'a> Canon<'a> {
    fn object(self, wrapped: bool) -> Object<'a> {
        self.out.push(b'{');
        Object {
            start: self.out.len(),
            out: self.out,
            entries: Vec::new(),
            in_order: true,
            pending_key: None,
            wrapped,
            raw_number: false,
        }
    }

    fn array(self, wrapped: bool) -> Array<'a> {
        self.out.push(b'[');
        Array {
            out: self.out,
            first: true,
            wrapped,
        }
    }

    /// Writes `{"variant":` for externally tagged enum variants.
    fn open_variant(&mut self, variant: &str) -> Result<()> {
        self.out.push(b'{');
        scalar(self.out, variant)?;
        self.out.push(b':');
        Ok(())
    }
}

macro_rules! scalars {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, v: $ty) -> Result<()> {
            scalar(self.out, &v)
        })*
    };
}

impl<'a> ser::Serializer for Canon<'a> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Array<'a>;
    type SerializeTuple = Array<'a>;
    type SerializeTupleStruct = Array<'a>;
    type SerializeTupleVariant = Array<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Object<'a>;

    scalars!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
    );

    fn serialize_none(self) -> Result<()> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<()> {
        value.serialize(self)
    }

    fn serialize_unit(self) -> Result<()> {
        self.serialize_none()
    }

    fn serialize_unit_struct(self, _: &'static str) -> Result<()> {
        self.serialize_none()
    }

    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Result<()> {
        scalar(self.out, variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<()> {
        value.serialize(self)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        mut self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<()> {
        self.open_variant(variant)?;
        value.serialize(Canon { out: self.out })?;
        self.out.push(b'}');
        Ok(())
    }

    fn serialize_seq(self, _: Option<usize>) -> Result<Array<'a>> {
        Ok(self.array(false))
    }

    fn serialize_tuple(self, _: usize) -> Result<Array<'a>> {
        Ok(self.array(false))
    }

    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Array<'a>> {
        Ok(self.array(false))
    }

    fn serialize_tuple_variant(
        mut self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Array<'a>> {
        self.open_variant(variant)?;
        Ok(self.array(true))
    }

    fn serialize_map(self, _: Option<usize>) -> Result<Object<'a>> {
        Ok(self.object(false))
    }

    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Object<'a>> {
        if name == RAW_NUMBER {
            return Ok(Object {
                start: self.out.len(),
                out: self.out,
                entries: Vec::new(),
                in_order: true,
                pending_key: None,
                wrapped: false,
                raw_number: true,
            });
        }
        Ok(self.object(false))
    }

    fn serialize_struct_variant(
        mut self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Object<'a>> {
        self.open_variant(variant)?;
        Ok(self.object(true))
    }
}

impl ser::SerializeSeq for Array<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeTuple for Array<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeTupleStruct for Array<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeTupleVariant for Array<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.element(value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<()> {
        self.pending_key = Some(key.serialize(KeySerializer)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let key = self
            .pending_key
            .take()
            .ok_or_else(|| <Error as ser::Error>::custom("map value without a key"))?;
        self.value(Cow::Owned(key), value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeStruct for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.value(Cow::Borrowed(key), value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Object<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<()> {
        self.value(Cow::Borrowed(key), value)
    }
    fn end(self) -> Result<()> {
        self.finish()
    }
}

/// Turns a map key into its string, as `serde_json` does: strings, chars,
/// integers and booleans (written as their text), unit variants; nothing else.
struct KeySerializer;

macro_rules! display_keys {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, v: $ty) -> Result<String> {
            Ok(v.to_string())
        })*
    };
}

macro_rules! refused_keys {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, _: $ty) -> Result<String> {
            Err(key_error())
        })*
    };
}

impl ser::Serializer for KeySerializer {
    type Ok = String;
    type Error = Error;
    type SerializeSeq = Impossible<String, Error>;
    type SerializeTuple = Impossible<String, Error>;
    type SerializeTupleStruct = Impossible<String, Error>;
    type SerializeTupleVariant = Impossible<String, Error>;
    type SerializeMap = Impossible<String, Error>;
    type SerializeStruct = Impossible<String, Error>;
    type SerializeStructVariant = Impossible<String, Error>;

    display_keys!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_char(char),
    );
    refused_keys!(
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_bytes(&[u8])
    );

    fn serialize_str(self, v: &str) -> Result<String> {
        Ok(v.to_owned())
    }
    fn serialize_none(self) -> Result<String> {
        Err(key_error())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<String> {
        Err(key_error())
    }
    fn serialize_unit(self) -> Result<String> {
        Err(key_error())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<String> {
        Err(key_error())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<String> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<String> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String> {
        Err(key_error())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq> {
        Err(key_error())
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple> {
        Err(key_error())
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct> {
        Err(key_error())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant> {
        Err(key_error())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap> {
        Err(key_error())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct> {
        Err(key_error())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant> {
        Err(key_error())
    }
}
