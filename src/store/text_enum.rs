//! Stored states as enums. A state column holds the variant's name as text, the same on SQLite
//! and PostgreSQL. sqlx's `#[derive(sqlx::Type)]` implements `Type` only for the concrete
//! databases, not for the `Any` driver the store runs on, so [`text_enum!`] writes the `Any`
//! impls itself: a row struct can `#[derive(FromRow)]` with an enum field, and a query binds
//! the enum as it binds a string.
//!
//! ```ignore
//! text_enum! {
//!     /// Where a confirmation stands.
//!     pub enum ConfirmationStatus {
//!         Pending = "pending",
//!         Approved = "approved",
//!     }
//! }
//! ```
//!
//! Text that names no variant is an error when the row is read ([`UnknownState`]), never a
//! silent default: a state written by a newer hearth, or by hand, is reported, not misread.

use std::fmt;

/// A stored state whose text names no variant of its enum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownState {
    /// The enum's name, e.g. `ConfirmationStatus`.
    pub kind: &'static str,
    /// The text found.
    pub text: String,
}

impl fmt::Display for UnknownState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown {} {:?} in the database", self.kind, self.text)
    }
}

impl std::error::Error for UnknownState {}

/// Declares an enum stored as text: `as_str`, `parse`, `ALL`, `Display`, `FromStr`, and the
/// sqlx `Type`, `Encode` and `Decode` impls for `Any`. See the module documentation.
macro_rules! text_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every variant, in declaration order.
            #[allow(dead_code)]
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The text stored for this variant.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            /// The variant stored as `text`.
            pub fn parse(text: &str) -> ::std::result::Result<Self, $crate::store::UnknownState> {
                match text {
                    $($text => Ok($name::$variant),)+
                    _ => Err($crate::store::UnknownState {
                        kind: stringify!($name),
                        text: text.to_string(),
                    }),
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::store::UnknownState;
            fn from_str(text: &str) -> ::std::result::Result<Self, Self::Err> {
                Self::parse(text)
            }
        }

        impl ::sqlx::Type<::sqlx::Any> for $name {
            fn type_info() -> ::sqlx::any::AnyTypeInfo {
                <str as ::sqlx::Type<::sqlx::Any>>::type_info()
            }
        }

        impl<'q> ::sqlx::Encode<'q, ::sqlx::Any> for $name {
            fn encode_by_ref(
                &self,
                buf: &mut <::sqlx::Any as ::sqlx::Database>::ArgumentBuffer,
            ) -> ::std::result::Result<::sqlx::encode::IsNull, ::sqlx::error::BoxDynError> {
                <&str as ::sqlx::Encode<'q, ::sqlx::Any>>::encode(self.as_str(), buf)
            }
        }

        impl<'r> ::sqlx::Decode<'r, ::sqlx::Any> for $name {
            fn decode(
                value: <::sqlx::Any as ::sqlx::Database>::ValueRef<'r>,
            ) -> ::std::result::Result<Self, ::sqlx::error::BoxDynError> {
                let text = <&str as ::sqlx::Decode<'r, ::sqlx::Any>>::decode(value)?;
                Ok(Self::parse(text)?)
            }
        }
    };
}

pub(crate) use text_enum;

#[cfg(test)]
mod tests {
    use sqlx::Row;

    use crate::store::test_support;

    text_enum! {
        /// A test state.
        enum Light {
            Red = "red",
            Green = "green",
        }
    }

    #[derive(sqlx::FromRow)]
    struct LightRow {
        light: Light,
    }

    #[test]
    fn text_round_trips_and_unknown_text_is_an_error() {
        for light in Light::ALL {
            assert_eq!(Light::parse(light.as_str()), Ok(*light));
        }
        assert_eq!(
            Light::parse("blue")
                .map(|_| ())
                .err()
                .map(|e| e.to_string()),
            Some("unknown Light \"blue\" in the database".to_string())
        );
        assert_eq!("green".parse::<Light>(), Ok(Light::Green));
        assert_eq!(Light::Red.to_string(), "red");
    }

    #[tokio::test]
    async fn binds_and_reads_through_the_any_driver() {
        let (store, _dir) = test_support::temp_store().await;
        let row: LightRow = sqlx::query_as("SELECT $1 AS light")
            .bind(Light::Green)
            .fetch_one(store.pool())
            .await
            .expect("bound as text, read as the enum");
        assert_eq!(row.light, Light::Green);
        let err = sqlx::query_as::<_, LightRow>("SELECT 'blue' AS light")
            .fetch_one(store.pool())
            .await
            .err()
            .expect("text that names no variant is an error");
        assert!(err.to_string().contains("unknown Light"), "{err}");
        let raw = sqlx::query("SELECT $1 AS light")
            .bind(Light::Red)
            .fetch_one(store.pool())
            .await
            .expect("bound as text");
        assert_eq!(
            raw.try_get::<String, _>("light").ok().as_deref(),
            Some("red")
        );
    }
}
