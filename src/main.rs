fn main() {
    std::process::exit(iced::cli::main());
}
