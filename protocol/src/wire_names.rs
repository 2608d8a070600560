//! [`wire_names!`]: the wire names of a fieldless enum, written once for every such enum
//! ([`crate::Protocol`], [`crate::ReportKind`]).

/// Gives a fieldless enum its wire names: `ALL` (every value, in the order listed), `as_str`
/// (its name), `Display` (the name) and `FromStr` (the name back, anything else refused with
/// `$unknown(name)`, a one-field error struct the caller defines with its own message).
macro_rules! wire_names {
    ($ty:ident, $unknown:ident, { $($variant:ident => $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every value, in documentation order.
            pub const ALL: [$ty; [$($name),+].len()] = [$($ty::$variant),+];

            /// The wire name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $unknown;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $ty::ALL
                    .into_iter()
                    .find(|v| v.as_str() == s)
                    .ok_or_else(|| $unknown(s.to_string()))
            }
        }
    };
}

pub(crate) use wire_names;
