//! JSON that refuses duplicate object keys, at any depth. serde_json keeps the last of
//! them, so `{"method":"GetTask","method":"SendMessage"}` would run a method that a proxy
//! or log in front of us, keeping the first, never saw.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Parses `bytes` as JSON, refusing duplicate keys. A duplicate is a data error
/// (`Category::Data`); malformed JSON is a syntax or EOF error, as serde_json says.
pub fn parse_unique(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = Unique.deserialize(&mut de)?;
    de.end()?;
    Ok(value)
}

/// Deserializes one JSON value whose objects have unique keys.
struct Unique;

impl<'de> DeserializeSeed<'de> for Unique {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Unique)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            let value = map.next_value_seed(Unique)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::error::Category;
    use serde_json::json;

    use super::*;

    #[test]
    fn duplicate_keys_are_refused_at_any_depth_and_the_rest_parses_as_serde_json_does() {
        let text = r#"{"a":[1,-2,3.5,"x",null,true,{"b":{}}],"c":{"d":"e"}}"#;
        assert_eq!(
            parse_unique(text.as_bytes()).unwrap(),
            serde_json::from_str::<Value>(text).unwrap()
        );
        for dup in [
            r#"{"method":"GetTask","method":"SendMessage"}"#,
            r#"{"params":{"message":{"role":"ROLE_USER","role":"ROLE_AGENT"}}}"#,
            r#"[{"a":1,"a":1}]"#,
        ] {
            let e = parse_unique(dup.as_bytes()).unwrap_err();
            assert_eq!(e.classify(), Category::Data, "{dup}");
            assert!(e.to_string().contains("duplicate key"), "{e}");
        }
        assert_eq!(
            parse_unique(b"{\"a\":").unwrap_err().classify(),
            Category::Eof
        );
        assert_eq!(
            parse_unique(b"{} x").unwrap_err().classify(),
            Category::Syntax
        );
        assert_eq!(parse_unique(b"\"\\u00e9\"").unwrap(), json!("é"));
    }
}
