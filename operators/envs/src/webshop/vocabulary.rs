//! The words a generated catalog is made of: product kinds in WebShop's five categories
//! (beauty, fashion, food, furniture, electronics), each with its breadcrumb, attribute
//! phrases, buying options and price band, plus brand syllables and instruction templates.

/// A buying option: its name as the item page shows it and the values products draw from.
pub struct OptionKind {
    pub name: &'static str,
    pub values: &'static [&'static str],
}

/// A kind of product: what the search query, type reward and instructions are about.
pub struct ProductKind {
    /// The noun phrase (`hair extension`); also the product's `query`.
    pub name: &'static str,
    /// WebShop's top-level category.
    pub category: &'static str,
    /// The breadcrumb below the category, parts separated by ` › `.
    pub breadcrumb: &'static str,
    /// Attribute phrases a product of this kind may have (2 to 4 of them).
    pub attributes: &'static [&'static str],
    /// Options a product of this kind offers (each with 2 to 5 of its values).
    pub options: &'static [&'static OptionKind],
    /// Prices are drawn uniformly in this band (dollars).
    pub price: (f64, f64),
}

pub const COLOR: OptionKind = OptionKind {
    name: "color",
    values: &[
        "black",
        "white",
        "navy blue",
        "grey",
        "red",
        "pink",
        "beige",
        "brown",
        "green",
        "purple",
        "yellow",
        "light blue",
        "dark brown",
        "silver",
        "gold",
        "rose gold",
    ],
};
pub const CLOTHING_SIZE: OptionKind = OptionKind {
    name: "size",
    values: &[
        "x-small", "small", "medium", "large", "x-large", "xx-large", "3x-large",
    ],
};
pub const SHOE_SIZE: OptionKind = OptionKind {
    name: "size",
    values: &[
        "6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "11", "12",
    ],
};
pub const LENGTH: OptionKind = OptionKind {
    name: "size",
    values: &[
        "12 inch", "14 inch", "16 inch", "18 inch", "20 inch", "22 inch", "24 inch",
    ],
};
pub const COUNT: OptionKind = OptionKind {
    name: "size",
    values: &[
        "pack of 1",
        "pack of 2",
        "pack of 3",
        "pack of 4",
        "pack of 6",
        "pack of 12",
    ],
};
pub const WEIGHT: OptionKind = OptionKind {
    name: "size",
    values: &[
        "4 ounce", "8 ounce", "12 ounce", "16 ounce", "1 pound", "2 pound", "5 pound",
    ],
};
pub const FLAVOR: OptionKind = OptionKind {
    name: "flavor name",
    values: &[
        "original",
        "vanilla",
        "chocolate",
        "strawberry",
        "sea salt",
        "honey",
        "cinnamon",
        "peanut butter",
        "mixed berry",
        "lemon",
    ],
};
pub const SCENT: OptionKind = OptionKind {
    name: "scent",
    values: &[
        "unscented",
        "lavender",
        "coconut",
        "tea tree",
        "rose",
        "eucalyptus",
        "citrus",
    ],
};
pub const STYLE: OptionKind = OptionKind {
    name: "style",
    values: &[
        "classic",
        "modern",
        "vintage",
        "minimalist",
        "rustic",
        "industrial",
    ],
};
pub const CAPACITY: OptionKind = OptionKind {
    name: "capacity",
    values: &["32gb", "64gb", "128gb", "256gb", "512gb", "1tb"],
};

const BEAUTY: &str = "beauty & personal care";
const FASHION: &str = "clothing, shoes & jewelry";
const FOOD: &str = "grocery & gourmet food";
const HOME: &str = "home & kitchen";
const ELECTRONICS: &str = "electronics";

macro_rules! kinds {
    ($($name:literal, $cat:ident, $crumb:literal, [$($attr:literal),*], [$($opt:ident),*], $lo:literal..$hi:literal;)*) => {
        /// Every product kind of a generated catalog.
        pub const KINDS: &[ProductKind] = &[$(ProductKind {
            name: $name,
            category: $cat,
            breadcrumb: $crumb,
            attributes: &[$($attr),*],
            options: &[$(&$opt),*],
            price: ($lo, $hi),
        }),*];
    };
}

kinds! {
    "hair extension", BEAUTY, "hair care › hair extensions", ["natural looking", "clip in", "heat resistant", "human hair", "easy to apply", "long lasting", "double weft", "tangle free", "soft touch", "seamless"], [COLOR, LENGTH], 15.0..90.0;
    "shampoo", BEAUTY, "hair care › shampoo & conditioner", ["sulfate free", "paraben free", "natural ingredients", "dry hair", "color treated", "cruelty free", "tea tree oil", "anti dandruff", "vegan", "moisturizing"], [SCENT, COUNT], 5.0..40.0;
    "face moisturizer", BEAUTY, "skin care › face › moisturizers", ["oil free", "sensitive skin", "anti aging", "hyaluronic acid", "fragrance free", "spf 30", "non greasy", "dermatologist tested", "vitamin c", "fast absorbing"], [SCENT, WEIGHT], 8.0..60.0;
    "lipstick", BEAUTY, "makeup › lips › lipstick", ["long lasting", "matte finish", "cruelty free", "waterproof", "highly pigmented", "paraben free", "moisturizing", "smudge proof"], [COLOR, COUNT], 4.0..35.0;
    "nail polish", BEAUTY, "foot, hand & nail care › nail polish", ["quick dry", "non toxic", "chip resistant", "high gloss", "long lasting", "vegan", "easy to apply"], [COLOR, COUNT], 3.0..25.0;
    "toothbrush", BEAUTY, "oral care › toothbrushes", ["soft bristles", "rechargeable", "travel size", "bpa free", "sensitive teeth", "long battery life", "easy to use"], [COLOR, COUNT], 3.0..80.0;
    "t-shirt", FASHION, "men › clothing › shirts", ["machine wash", "short sleeve", "cotton blend", "slim fit", "moisture wicking", "crew neck", "relaxed fit", "quick drying"], [COLOR, CLOTHING_SIZE], 8.0..45.0;
    "hoodie", FASHION, "women › clothing › fashion hoodies", ["machine wash", "long sleeve", "fleece lined", "drawstring closure", "loose fit", "soft material", "kangaroo pocket"], [COLOR, CLOTHING_SIZE], 18.0..70.0;
    "running shoe", FASHION, "men › shoes › athletic", ["non slip", "rubber sole", "lightweight", "breathable mesh", "arch support", "lace up", "memory foam", "shock absorbing"], [COLOR, SHOE_SIZE], 25.0..150.0;
    "sandal", FASHION, "women › shoes › sandals", ["open toe", "ankle strap", "rubber sole", "arch support", "non slip", "faux leather", "cushioned footbed"], [COLOR, SHOE_SIZE], 12.0..80.0;
    "yoga pant", FASHION, "women › clothing › active › leggings", ["high waist", "tummy control", "four way stretch", "moisture wicking", "squat proof", "machine wash", "side pockets"], [COLOR, CLOTHING_SIZE], 12.0..55.0;
    "wrist watch", FASHION, "men › watches › wrist watches", ["stainless steel", "water resistant", "quartz movement", "leather band", "easy to read", "scratch resistant", "date display"], [COLOR, STYLE], 20.0..250.0;
    "coffee bean", FOOD, "beverages › coffee › whole bean", ["dark roast", "single origin", "fair trade", "usda organic", "low acid", "gluten free", "non gmo", "small batch"], [FLAVOR, WEIGHT], 8.0..45.0;
    "protein bar", FOOD, "snack foods › bars › protein", ["gluten free", "low sugar", "high protein", "non gmo", "keto friendly", "plant based", "individually wrapped", "soy free"], [FLAVOR, COUNT], 10.0..50.0;
    "green tea", FOOD, "beverages › tea › green", ["usda organic", "caffeine free", "non gmo", "individually wrapped", "low calorie", "kosher certified", "sugar free"], [FLAVOR, COUNT], 4.0..30.0;
    "trail mix", FOOD, "snack foods › nuts & seeds › trail mix", ["gluten free", "non gmo", "no artificial flavors", "high protein", "resealable bag", "low sodium", "vegan"], [FLAVOR, WEIGHT], 6.0..35.0;
    "olive oil", FOOD, "pantry staples › oils › olive", ["extra virgin", "cold pressed", "usda organic", "non gmo", "kosher certified", "glass bottle", "first harvest"], [FLAVOR, WEIGHT], 9.0..55.0;
    "office chair", HOME, "furniture › home office furniture › chairs", ["lumbar support", "adjustable height", "easy assemble", "high back", "breathable mesh", "heavy duty", "swivel wheels"], [COLOR, STYLE], 60.0..400.0;
    "bookshelf", HOME, "furniture › living room furniture › bookcases", ["easy assemble", "solid wood", "space saving", "heavy duty", "storage space", "engineered wood", "wall mounted"], [COLOR, STYLE], 35.0..260.0;
    "throw pillow", HOME, "home decor › decorative pillows", ["machine washable", "hidden zipper", "soft velvet", "double sided", "living room", "super soft", "hypoallergenic"], [COLOR, COUNT], 8.0..45.0;
    "bed sheet", HOME, "bedding › sheets & pillowcases", ["deep pocket", "wrinkle free", "machine washable", "egyptian cotton", "breathable", "fade resistant", "hypoallergenic"], [COLOR, STYLE], 18.0..120.0;
    "wireless earbud", ELECTRONICS, "headphones › earbud headphones", ["noise cancelling", "long battery life", "water resistant", "fast charging", "touch control", "bluetooth 5", "hands free"], [COLOR, COUNT], 15.0..200.0;
    "usb flash drive", ELECTRONICS, "computers › data storage › usb flash drives", ["high speed", "usb 3", "plug and play", "metal casing", "key chain", "water resistant", "password protection"], [CAPACITY, COUNT], 6.0..60.0;
    "phone case", ELECTRONICS, "cell phones › cases & holsters", ["shock absorbing", "slim fit", "wireless charging", "scratch resistant", "easy install", "raised edges", "clear back"], [COLOR, STYLE], 6.0..40.0;
    "hdmi cable", ELECTRONICS, "accessories › cables › hdmi cables", ["high speed", "gold plated", "4k ultra hd", "braided nylon", "plug and play", "ethernet", "heavy duty"], [COUNT, STYLE], 5.0..35.0;
}

/// Syllables of generated brand names (two or three of them).
pub const BRAND_SYLLABLES: [&str; 24] = [
    "lu", "no", "va", "ker", "zen", "tri", "mo", "sa", "bel", "qui", "dor", "fa", "ri", "ton",
    "el", "vo", "ma", "xi", "ra", "po", "lin", "ga", "shi", "den",
];

/// Words a title may end with, after the kind.
pub const TITLE_TAILS: [&str; 8] = [
    "for women",
    "for men",
    "for home",
    "for travel",
    "for daily use",
    "gift set",
    "value pack",
    "premium edition",
];

/// How a generated instruction opens; `{kind}` and `{attrs}` are filled in.
pub const INSTRUCTION_TEMPLATES: [&str; 6] = [
    "i need a {kind} that is {attrs}",
    "i am looking for a {attrs} {kind}",
    "find me a {kind} which is {attrs}",
    "i want to buy a {kind} that is {attrs}",
    "i'm searching for a {attrs} {kind}",
    "please get me a {kind}, {attrs}",
];
