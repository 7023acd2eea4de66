//! `calculate`: a hand-written arithmetic evaluator. It only knows numbers, operators, a fixed
//! list of functions and two constants, so nothing a model writes can run code.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{GROUP, number};
use crate::tool::{ToolContext, ToolError, TypedTool};

/// Longest expression accepted, in bytes.
const MAX_LEN: usize = 1000;
/// Deepest nesting of parentheses, unary signs and powers; keeps recursion bounded.
const MAX_DEPTH: usize = 64;

const FUNCTIONS: &[&str] = &[
    "sqrt", "abs", "round", "floor", "ceil", "min", "max", "ln", "log10", "sin", "cos", "tan",
];

/// Evaluate an arithmetic expression exactly as written: + - * / % ^ (power), parentheses,
/// decimals, functions sqrt abs round floor ceil min max ln log10 sin cos tan (radians),
/// constants pi and e.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Calculate {
    /// e.g. (12.5 * 4 + sqrt(16)) / 3 or 2^10 % 7
    #[schemars(length(max = MAX_LEN))]
    expression: String,
}

impl TypedTool for Calculate {
    const NAME: &'static str = "calculate";
    const GROUP: &'static str = GROUP;
    const TAGS: &'static str = "math, calculator, compute, arithmetic, evaluate";
    type Output = Value;

    async fn run(self, _: &ToolContext) -> Result<Value, ToolError> {
        let result = evaluate(&self.expression).map_err(ToolError::InvalidArguments)?;
        Ok(json!({"expression": self.expression, "result": number(result)}))
    }
}

/// The value of `expression`, or a message saying what is wrong with it.
pub fn evaluate(expression: &str) -> Result<f64, String> {
    if expression.len() > MAX_LEN {
        return Err(format!(
            "the expression is longer than {MAX_LEN} characters"
        ));
    }
    let tokens = tokenize(expression)?;
    if tokens.is_empty() {
        return Err("the expression is empty".into());
    }
    let mut parser = Parser {
        tokens,
        pos: 0,
        depth: 0,
    };
    let value = parser.expression()?;
    if let Some(token) = parser.tokens.get(parser.pos) {
        return Err(format!(
            "unexpected {} after a complete expression",
            token.describe()
        ));
    }
    if !value.is_finite() {
        return Err(
            "the result is not a finite number (overflow or an undefined operation)".into(),
        );
    }
    Ok(value)
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Number(f64),
    Ident(String),
    Op(char),
    Open,
    Close,
    Comma,
}

impl Token {
    fn describe(&self) -> String {
        match self {
            Token::Number(n) => format!("number {n}"),
            Token::Ident(name) => format!("`{name}`"),
            Token::Op(op) => format!("`{op}`"),
            Token::Open => "`(`".into(),
            Token::Close => "`)`".into(),
            Token::Comma => "`,`".into(),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => i += 1,
            '0'..='9' | '.' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                    i += 1;
                }
                // Scientific notation: 1.5e3, 2E-4 (but not the constant e on its own).
                if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                    let mut j = i + 1;
                    if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
                        j += 1;
                    }
                    if j < chars.len() && chars[j].is_ascii_digit() {
                        while j < chars.len() && chars[j].is_ascii_digit() {
                            j += 1;
                        }
                        i = j;
                    }
                }
                let literal: String = chars[start..i].iter().collect();
                let value = literal
                    .parse::<f64>()
                    .map_err(|_| format!("{literal:?} is not a number"))?;
                tokens.push(Token::Number(value));
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                tokens.push(Token::Ident(
                    chars[start..i].iter().collect::<String>().to_lowercase(),
                ));
            }
            '*' if chars.get(i + 1) == Some(&'*') => {
                tokens.push(Token::Op('^'));
                i += 2;
            }
            '+' | '-' | '*' | '/' | '%' | '^' => {
                tokens.push(Token::Op(c));
                i += 1;
            }
            '×' => {
                tokens.push(Token::Op('*'));
                i += 1;
            }
            '÷' => {
                tokens.push(Token::Op('/'));
                i += 1;
            }
            '(' => {
                tokens.push(Token::Open);
                i += 1;
            }
            ')' => {
                tokens.push(Token::Close);
                i += 1;
            }
            ',' => {
                tokens.push(Token::Comma);
                i += 1;
            }
            other => {
                return Err(format!(
                    "unexpected character {other:?} at position {}; use numbers, + - * / % ^, parentheses and functions",
                    i + 1
                ));
            }
        }
    }
    Ok(tokens)
}

/// Recursive descent. Precedence, loosest first: `+ -`, `* / %`, unary `-`, `^` (right
/// associative, so `-2^2` is -4 and `2^3^2` is 512).
struct Parser {
    tokens: Vec<Token>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        token
    }

    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!(
                "the expression nests deeper than {MAX_DEPTH} levels"
            ));
        }
        Ok(())
    }

    fn expression(&mut self) -> Result<f64, String> {
        self.enter()?;
        let mut value = self.term()?;
        while let Some(Token::Op(op @ ('+' | '-'))) = self.peek() {
            let op = *op;
            self.pos += 1;
            let rhs = self.term()?;
            value = if op == '+' { value + rhs } else { value - rhs };
        }
        self.depth -= 1;
        Ok(value)
    }

    fn term(&mut self) -> Result<f64, String> {
        let mut value = self.unary()?;
        while let Some(Token::Op(op @ ('*' | '/' | '%'))) = self.peek() {
            let op = *op;
            self.pos += 1;
            let rhs = self.unary()?;
            value = match op {
                '*' => value * rhs,
                _ if rhs == 0.0 => return Err("division by zero".into()),
                '/' => value / rhs,
                _ => value % rhs,
            };
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<f64, String> {
        self.enter()?;
        let value = match self.peek() {
            Some(Token::Op('-')) => {
                self.pos += 1;
                -self.unary()?
            }
            Some(Token::Op('+')) => {
                self.pos += 1;
                self.unary()?
            }
            _ => self.power()?,
        };
        self.depth -= 1;
        Ok(value)
    }

    fn power(&mut self) -> Result<f64, String> {
        let base = self.primary()?;
        if let Some(Token::Op('^')) = self.peek() {
            self.pos += 1;
            let exponent = self.unary()?;
            return Ok(base.powf(exponent));
        }
        Ok(base)
    }

    fn primary(&mut self) -> Result<f64, String> {
        match self.next() {
            Some(Token::Number(n)) => Ok(n),
            Some(Token::Open) => {
                let value = self.expression()?;
                match self.next() {
                    Some(Token::Close) => Ok(value),
                    _ => Err("missing closing parenthesis `)`".into()),
                }
            }
            Some(Token::Ident(name)) => {
                if let Some(Token::Open) = self.peek() {
                    self.pos += 1;
                    let args = self.arguments(&name)?;
                    call(&name, &args)
                } else {
                    match name.as_str() {
                        "pi" | "π" => Ok(std::f64::consts::PI),
                        "e" => Ok(std::f64::consts::E),
                        _ if FUNCTIONS.contains(&name.as_str()) => {
                            Err(format!("`{name}` is a function; write {name}(...)"))
                        }
                        _ => Err(unknown(&name)),
                    }
                }
            }
            Some(token) => Err(format!("unexpected {}", token.describe())),
            None => Err("the expression ends too early".into()),
        }
    }

    fn arguments(&mut self, name: &str) -> Result<Vec<f64>, String> {
        let mut args = Vec::new();
        if let Some(Token::Close) = self.peek() {
            self.pos += 1;
            return Ok(args);
        }
        loop {
            args.push(self.expression()?);
            match self.next() {
                Some(Token::Comma) => continue,
                Some(Token::Close) => return Ok(args),
                _ => return Err(format!("missing `)` after the arguments of {name}")),
            }
        }
    }
}

fn unknown(name: &str) -> String {
    format!(
        "unknown identifier `{name}`; known functions: {}; constants: pi, e",
        FUNCTIONS.join(", ")
    )
}

fn call(name: &str, args: &[f64]) -> Result<f64, String> {
    let one = |f: fn(f64) -> f64| match args {
        [x] => Ok(f(*x)),
        _ => Err(format!(
            "{name} takes exactly one argument, got {}",
            args.len()
        )),
    };
    match name {
        "sqrt" => match args {
            [x] if *x < 0.0 => Err("sqrt of a negative number".into()),
            _ => one(f64::sqrt),
        },
        "abs" => one(f64::abs),
        "round" => match args {
            [x] => Ok(x.round()),
            [x, digits] if digits.fract() == 0.0 && (0.0..=15.0).contains(digits) => {
                let scale = 10f64.powf(*digits);
                Ok((x * scale).round() / scale)
            }
            [_, _] => Err("round(x, digits): digits must be a whole number from 0 to 15".into()),
            _ => Err(format!(
                "round takes one or two arguments, got {}",
                args.len()
            )),
        },
        "floor" => one(f64::floor),
        "ceil" => one(f64::ceil),
        "min" | "max" => {
            if args.is_empty() {
                return Err(format!("{name} needs at least one argument"));
            }
            let pick = if name == "min" { f64::min } else { f64::max };
            Ok(args.iter().copied().fold(args[0], pick))
        }
        "ln" | "log10" => match args {
            [x] if *x <= 0.0 => Err(format!("{name} is only defined for positive numbers")),
            _ => one(if name == "ln" { f64::ln } else { f64::log10 }),
        },
        "sin" => one(f64::sin),
        "cos" => one(f64::cos),
        "tan" => one(f64::tan),
        _ => Err(unknown(name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(text: &str) -> f64 {
        evaluate(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn evaluates_with_the_usual_precedence() {
        assert_eq!(eval("1 + 2 * 3"), 7.0);
        assert_eq!(eval("(1 + 2) * 3"), 9.0);
        assert_eq!(eval("2^3^2"), 512.0);
        assert_eq!(eval("-2^2"), -4.0);
        assert_eq!(eval("2^-1"), 0.5);
        assert_eq!(eval("2 ** 10"), 1024.0);
        assert_eq!(eval("--3"), 3.0);
        assert_eq!(eval("17 % 5"), 2.0);
        assert_eq!(eval("10 / 4"), 2.5);
        assert_eq!(eval(".5 + 1.25"), 1.75);
        assert_eq!(eval("1.5e3"), 1500.0);
        assert_eq!(eval("3 - 2 - 1"), 0.0);
        assert_eq!(eval("12 / 2 / 3"), 2.0);
    }

    #[test]
    fn knows_its_functions_and_constants() {
        assert_eq!(eval("sqrt(16) + abs(-3)"), 7.0);
        assert_eq!(eval("round(2.5) + floor(1.9) + ceil(1.1)"), 6.0);
        assert_eq!(eval("round(1.23456, 2)"), 1.23);
        assert_eq!(eval("min(4, 2, 8) + max(1, 9)"), 11.0);
        assert_eq!(eval("ln(e)"), 1.0);
        assert_eq!(eval("log10(1000)"), 3.0);
        assert!((eval("sin(pi / 2)") - 1.0).abs() < 1e-12);
        assert!((eval("cos(0) + tan(0)") - 1.0).abs() < 1e-12);
        assert_eq!(eval("2 * PI"), 2.0 * std::f64::consts::PI);
    }

    #[test]
    fn explains_what_is_wrong() {
        let err = |text: &str| evaluate(text).expect_err(text);
        assert_eq!(err("1 / 0"), "division by zero");
        assert_eq!(err("5 % (2 - 2)"), "division by zero");
        assert!(err("foo + 1").contains("unknown identifier `foo`"));
        assert!(err("__import__('os')").contains("unexpected character '\\''"));
        assert!(err("system(1)").contains("unknown identifier `system`"));
        assert!(err("1 +").contains("ends too early"));
        assert!(err("(1 + 2").contains("missing closing parenthesis"));
        assert!(err("1 2").contains("unexpected number 2"));
        assert!(err("1 ; 2").contains("unexpected character ';'"));
        assert!(err("1..2").contains("is not a number"));
        assert!(err("sqrt(-1)").contains("negative"));
        assert!(err("ln(0)").contains("positive"));
        assert!(err("sqrt(1, 2)").contains("exactly one argument"));
        assert!(err("sqrt").contains("is a function"));
        assert!(err("10 ^ 400").contains("not a finite number"));
        assert!(err("").contains("empty"));
        assert!(err(&"1+".repeat(600)).contains("longer than"));
        assert!(err(&format!("{}1{}", "(".repeat(100), ")".repeat(100))).contains("nests deeper"));
        assert!(err(&"-".repeat(200)).contains("nests deeper"));
    }

    #[tokio::test]
    async fn the_tool_returns_json_and_invalid_arguments() {
        let run = |arguments: Value| super::super::call("calculate", arguments);
        let value = run(json!({"expression": "0.1 + 0.2"})).await.expect("ok");
        assert_eq!(value["result"], json!(0.3));
        let value = run(json!({"expression": "2^10"})).await.expect("ok");
        assert_eq!(value["result"], json!(1024));
        assert!(matches!(
            run(json!({"expression": "1/0"})).await,
            Err(ToolError::InvalidArguments(m)) if m.contains("division by zero")
        ));
        let err = run(json!({"expression": 12})).await.expect_err("a number");
        assert!(err.to_string().contains("`expression`"), "{err}");
        assert!(matches!(
            run(json!({})).await,
            Err(ToolError::InvalidArguments(_))
        ));
    }
}
